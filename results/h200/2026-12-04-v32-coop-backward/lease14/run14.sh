#!/usr/bin/env bash
# Lease 14: where tiled-coop's bwd_kv spends its time (it runs 2.4x bwd_q per block with 4 products
# to 3). Binary J = commit d3aa681 + J.diff: `--override ABL=bits` removes parts of bwd_kv (wrong
# output by design): 1 Q/dO (and L/D) loads + staging, 2 the Sᵀ / dPᵀ products, 4 P, dS and
# their stores, 8 the dV / dK products, 16 the L / D reads. bash .exp/run14.sh $OUT/l14
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/J.gz > /tmp/J; chmod +x /tmp/J
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop --backward"
/tmp/J run --variant tiled $SEED --seq 1024 --reps 30 --warmup 10 > /dev/null 2>&1
for a in 0 1 2 4 8 16 6 14 15 31 0; do
  echo "## N1024 ABL=$a" >> $L
  timeout 40 /tmp/J run $SEED --seq 1024 --reps 10 --warmup-ms 300 --verbose --override ABL=$a 2>&1 | grep -E "^bwd_kv|^bwd_q|rror" | cut -c1-100 >> $L
done
for a in 0 2 8 15; do
  echo "## N4096 ABL=$a" >> $L
  timeout 60 /tmp/J run $SEED --seq 4096 --reps 3 --warmup-ms 300 --verbose --override ABL=$a 2>&1 | grep -E "^bwd_kv|^bwd_q|rror" | cut -c1-100 >> $L
done
cat $L
