#!/usr/bin/env bash
# Decode A/B in one lease: split-kv v3 with one wave of ~1024 workgroups (s6, UNROLL 16 by
# override) against slices of at most 256 keys, more workgroups than fit at once (s7).
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
.exp/s7 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for c in "1 16384" "1 65536" "16 4096" "16 16384" "16 65536"; do
  set -- $c
  S="--batch $1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $2 --no-causal --dtype f16"
  for r in "s6 --override UNROLL=16" "s7"; do
    set -- $r
    echo "## $r split-kv $S"
    .exp/$1 run --variant split-kv $S --reps 20 ${2:-} ${3:-} --json $out/$1_${c// /_}.json 2>&1 | grep -E "^split|rror"
  done
done
cd $out && tar czf ab.tar.gz *.json && rm *.json
