#!/usr/bin/env bash
# Lease 10 (prepared at the end of stop 25, not yet run). Binary F = HEAD of stop 25 + F.diff
# (experiment switches, all off unless set). Run: bash .exp/run10.sh $OUT/l10 (~6-7 min:
# give the device call timeout_s 590 and write nothing outside $OUT).
# 1. split-kv A/B: the default kernel against split_kv_hpl.wgsl (ATTN_HPL=1: every lane set
#    serves all GROUP <= 4 query heads, 4x the unique K/V rows in flight), both with the 500 ms
#    warm-up floor of edea24b; PyTorch's best in the same lease.
# 2. tiled-coop two-tile kernel ablations (--override ABL=bits, wrong output by design).
# 3. tiled-coop two-tile kernel with the heaviest causal query blocks first (--override HEAVY=1).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/F.gz > /tmp/F; chmod +x /tmp/F
step() { echo "## $*" >> $L; timeout ${T:-40} "$@" 2>&1 | grep -E "^(split|tiled|flash|efficient|cudnn|error|Error)|rror" | cut -c1-150 >> $L; }
/tmp/F run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for b in 1 16; do for m in 4096 16384 65536; do
  S="--batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $m --no-causal --dtype f16 --reps 20"
  for r in 1 2; do
    echo "# default" >> $L; step /tmp/F run --variant split-kv $S
    echo "# ATTN_HPL=1" >> $L; ATTN_HPL=1 step /tmp/F run --variant split-kv $S
  done
  PYTHONUNBUFFERED=1 T=45 step python3 bench/torch_sdpa.py $S --variants flash,cudnn
done; done
# HPL checks: GQA with mask and dropout, bf16
export ATTN_HPL=1
step /tmp/F run --variant split-kv --batch 2 --heads 32 --kv-heads 8 --head-dim 128 --seq 4 --kv-seq 5000 --causal bottom-right --dtype f16 --key-padding 4000,1234 --reps 5
step /tmp/F run --variant split-kv --batch 2 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 5000 --no-causal --dtype bf16 --dropout 0.1 --reps 5
step /tmp/F run --variant split-kv --batch 2 --heads 16 --kv-heads 16 --head-dim 64 --seq 16 --kv-seq 5000 --causal bottom-right --dtype f32 --reps 5
export -n ATTN_HPL; unset ATTN_HPL
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop --seq 1024 --reps 20"
for a in 0 1 2 4 8 16 26 31 0; do step /tmp/F run $SEED --override ABL=$a; done
# 3. heaviest causal blocks first (two-tile kernel), N 1024 and 4096, A B A B.
for r in 1 2; do for h in 0 1; do
  step /tmp/F run $SEED --override HEAVY=$h
  T=60 step /tmp/F run --batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop --seq 4096 --reps 10 --override HEAVY=$h
done; done
cat $L
