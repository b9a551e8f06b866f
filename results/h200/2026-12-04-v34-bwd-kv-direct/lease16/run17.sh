#!/usr/bin/env bash
# Lease 16 (stop 27). Binaries: M = main at e541f22 (bwd_kv with K/V matrices from device
# memory, = L of lease 15 cleanly), F = M + F.diff (forward tiled-coop kernels without the `sl`
# array when LO = 0: rt2 20992 -> 16897 bytes), P = M + P.diff (bwd_kv with 13824 bytes of unused
# workgroup storage: back at 30848 — does storage alone make L faster?), Q = M + Q.diff (bwd_kv
# and bwd_q with one f32 score tile a subgroup, S then dP: 12928 and 10752 bytes).
#   bash .exp/run17.sh $OUT/l16
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt; C=$OUT/checks.txt
source bench/h200_env.sh
for b in M F P Q; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop"
/tmp/M run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do
  for b in M P Q; do
    echo "## bwd $b N1024" >> $L
    timeout 40 /tmp/$b run $SEED --backward --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
    echo "## bwd $b N4096" >> $L
    timeout 60 /tmp/$b run $SEED --backward --seq 4096 --reps 3 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
  done
  for b in M F; do
    echo "## fwd $b N1024 / N4096 / D128" >> $L
    timeout 30 /tmp/$b run $SEED --seq 1024 --reps 20 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
    timeout 40 /tmp/$b run $SEED --seq 4096 --reps 10 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
    timeout 30 /tmp/$b run $SEED --seq 1024 --head-dim 128 --reps 10 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
  done
done
step() { echo "## $*" >> $C; timeout 30 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror|FAIL|  d[QKV]" | cut -c1-160 >> $C; }
for b in M Q; do
  X="--variant tiled-coop --backward --dtype f16 --reps 3 --warmup-ms 0"
  step /tmp/$b run $X --batch 2 --heads 4 --seq 128 --head-dim 64
  step /tmp/$b run $X --batch 2 --heads 4 --seq 100 --head-dim 32 --no-causal
  step /tmp/$b run $X --batch 1 --heads 2 --seq 200 --head-dim 16 --key-padding 150
  step /tmp/$b run $X --batch 2 --heads 8 --kv-heads 2 --seq 96 --kv-seq 160 --causal bottom-right --head-dim 64
  step /tmp/$b run $X --batch 2 --heads 8 --kv-heads 2 --seq 160 --kv-seq 96 --causal top-left --head-dim 48
  step /tmp/$b run $X --batch 2 --heads 4 --seq 128 --head-dim 64 --dropout 0.1
  step /tmp/$b run $X --batch 2 --heads 4 --seq 70 --head-dim 64 --key-padding 50,70 --dropout 0.2
  step /tmp/$b run $X --batch 1 --heads 4 --seq 1 --kv-seq 77 --head-dim 64
done
bash .exp/checks.sh /tmp/F $C
cat $L; grep -c PASS $C; grep -E "FAIL|rror" $C | head
