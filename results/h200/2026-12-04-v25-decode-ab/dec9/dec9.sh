#!/usr/bin/env bash
# Decode A/B in one lease: split-kv with one split dispatch over every K/V head (s8) against
# dispatches of at most 128 MiB of K (and of V) each, one after another (s9).
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
.exp/s9 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for c in "8 16384" "16 16384" "16 65536"; do
  set -- $c
  S="--batch $1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $2 --no-causal --dtype f16"
  for r in s8 s9; do
    echo "## $r split-kv $S"
    .exp/$r run --variant split-kv $S --reps 20 --json $out/${r}_${c// /_}.json 2>&1 | grep -E "^split|rror"
  done
done
cd $out && tar czf ab.tar.gz *.json && rm *.json
