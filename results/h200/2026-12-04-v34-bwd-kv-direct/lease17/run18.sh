#!/usr/bin/env bash
# Lease 17 (stop 27). Binaries: R = main at 7157a04 (bwd_kv 12928 bytes, bwd_q 10752),
# W = R + W.diff (both passes with 8 subgroups a workgroup: 128 keys / rows, workgroup storage per
# subgroup 2.6 KB instead of 3.2 (bwd_kv), Q/dO staging per block shared by twice the keys),
# S2 = R + S2.diff (bwd_kv: P and dS through one f16 tile a subgroup, dV's products between:
# 10880 bytes).   bash .exp/run18.sh $OUT/l17
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt; C=$OUT/checks.txt
source bench/h200_env.sh
for b in R W S2; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop --backward"
/tmp/R run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do
  for b in R W S2; do
    echo "## bwd $b N1024" >> $L
    timeout 40 /tmp/$b run $SEED --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
    echo "## bwd $b N4096" >> $L
    timeout 60 /tmp/$b run $SEED --seq 4096 --reps 3 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
  done
done
step() { echo "## $*" >> $C; timeout 30 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror|FAIL|  d[QKV]" | cut -c1-160 >> $C; }
for b in W S2; do
  X="--variant tiled-coop --backward --dtype f16 --reps 3 --warmup-ms 0"
  step /tmp/$b run $X --batch 2 --heads 4 --seq 128 --head-dim 64
  step /tmp/$b run $X --batch 2 --heads 4 --seq 100 --head-dim 32 --no-causal
  step /tmp/$b run $X --batch 1 --heads 2 --seq 200 --head-dim 16 --key-padding 150
  step /tmp/$b run $X --batch 2 --heads 8 --kv-heads 2 --seq 96 --kv-seq 160 --causal bottom-right --head-dim 64
  step /tmp/$b run $X --batch 2 --heads 8 --kv-heads 2 --seq 160 --kv-seq 96 --causal top-left --head-dim 48
  step /tmp/$b run $X --batch 2 --heads 4 --seq 128 --head-dim 64 --dropout 0.1
  step /tmp/$b run $X --batch 2 --heads 4 --seq 70 --head-dim 64 --key-padding 50,70 --dropout 0.2
  step /tmp/$b run $X --batch 1 --heads 4 --seq 1 --kv-seq 77 --causal top-left --head-dim 64
done
cat $L; grep -c PASS $C; grep -E "FAIL|rror" $C | head
