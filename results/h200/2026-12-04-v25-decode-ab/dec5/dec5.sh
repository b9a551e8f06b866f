#!/usr/bin/env bash
# Decode A/B in one lease: split-kv v3 (s5: a lane set per query head, no register arrays indexed
# by head; the combine reads slices in parallel) at UNROLL 8 (its default for D 128 f16), 4, 2.
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
.exp/s5 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for c in "1 4096" "1 16384" "1 65536" "16 4096" "16 16384" "16 65536"; do
  set -- $c
  S="--batch $1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $2 --no-causal --dtype f16"
  for u in 8 4 2; do
    echo "## s5 split-kv B=$1 M=$2 UNROLL=$u"
    .exp/s5 run --variant split-kv $S --reps 20 --override UNROLL=$u --json $out/s5_u${u}_B$1_M$2.json 2>&1 | grep -E "^split|rror"
  done
done
cd $out && tar czf ab.tar.gz *.json && rm *.json
