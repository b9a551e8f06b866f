#!/usr/bin/env bash
# Lease 2 (v29): tiled-coop ablations (experiment-only override ABL, B.diff), and the decode
# cliff: rotated block order per K/V head (ATTN_ROT=1) and the number of splits (ATTN_SPLITS).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/B.gz > /tmp/B; chmod +x /tmp/B
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(tiled|split|flash|efficient|cudnn|error|Error)|rror" | cut -c1-150 >> $L; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $L
/tmp/B run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --reps 20 --variant split-kv"
for r in 0 1; do
  for s in "16 16384" "64 4096" "8 16384" "16 4096" "1 65536" "16 65536"; do set -- $s
    echo "# ATTN_ROT=$r" >> $L; ATTN_ROT=$r step /tmp/B run $D --batch $1 --kv-heads 8 --kv-seq $2; done
done
for r in 0 1; do for sp in 16 32 64 128; do
  echo "# ATTN_ROT=$r ATTN_SPLITS=$sp" >> $L; ATTN_ROT=$r ATTN_SPLITS=$sp step /tmp/B run $D --batch 16 --kv-heads 8 --kv-seq 16384; done; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop"
for a in 0 1 2 4 8 16 18 26 31 0; do step /tmp/B run $SEED --seq 1024 --reps 20 --override ABL=$a; done
for a in 0 1 2 8; do T=90 step /tmp/B run $SEED --seq 4096 --reps 10 --override ABL=$a; done
cat $L
