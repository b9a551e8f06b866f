#!/usr/bin/env bash
# Lease 12: tiled-coop backward, G (lease 11's binary) against H (bwd_kv prefetches its rows' L
# and D a block ahead; bwd_dot with 16 threads a row), then bench/h200_backward.sh with H.
# bash .exp/run12.sh $OUT/l12
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt
source bench/h200_env.sh
for b in G H; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16"
/tmp/H run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do for b in G H; do
  echo "## $b N1024" >> $L
  timeout 60 /tmp/$b run --variant tiled-coop --backward $SEED --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^tiled-coop|bwd_|  [0-9] " | cut -c1-160 >> $L
done; done
for b in G H; do
  echo "## $b N4096" >> $L
  timeout 90 /tmp/$b run --variant tiled-coop --backward $SEED --seq 4096 --reps 5 --verbose 2>&1 | grep -E "^tiled-coop|bwd_|  [0-9] " | cut -c1-160 >> $L
done
timeout 420 bash bench/h200_backward.sh /tmp/H $OUT/bwd > /dev/null 2>&1
cat $L; tail -40 $OUT/bwd/log.txt | cut -c1-200
