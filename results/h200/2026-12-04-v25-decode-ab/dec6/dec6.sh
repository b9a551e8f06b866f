#!/usr/bin/env bash
# Decode A/B in one lease: split-kv v3 with contiguous slices (s5) against slices dealt
# round-robin in blocks (s6), UNROLL 8; and s6 at UNROLL 16.
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
.exp/s6 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for c in "1 4096" "1 65536" "16 4096" "16 16384" "16 65536"; do
  set -- $c
  S="--batch $1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $2 --no-causal --dtype f16"
  for r in "s5 8" "s6 8" "s6 16"; do
    set -- $r
    echo "## $1 split-kv $S UNROLL=$2"
    .exp/$1 run --variant split-kv $S --reps 20 --override UNROLL=$2 --json $out/$1_u$2_${c// /_}.json 2>&1 | grep -E "^split|rror"
  done
done
cd $out && tar czf ab.tar.gz *.json && rm *.json
