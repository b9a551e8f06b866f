#!/usr/bin/env bash
# Decode A/B in one lease: split-kv v2 (s3: grid fixed, a workgroup per slice staging K in
# workgroup memory) against v3 (s4: key groups of 16 lanes, 16-byte K and V loads in flight,
# shuffles, no barrier in the loop).
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
.exp/s4 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for c in "1 4096" "1 16384" "1 65536" "16 4096" "16 16384" "16 65536"; do
  set -- $c
  S="--batch $1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $2 --no-causal --dtype f16"
  for bin in s3 s4; do
    [ $bin = s3 ] && [ $2 = 65536 ] && [ $1 = 16 ] && continue
    echo "## $bin split-kv B=$1 M=$2"
    .exp/$bin run --variant split-kv $S --reps 20 --json $out/${bin}_B$1_M$2.json 2>&1 | grep -E "^split|rror"
  done
done
cd $out && tar czf ab.tar.gz *.json && rm *.json
