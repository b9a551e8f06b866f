#!/usr/bin/env bash
# Lease 6: the sweeps over N again with the fixed `sweep` (M follows N) and the committed
# kernels (binary of commit 6aaaf70), B8 H16 D64 causal, every dtype; tarred after each sweep.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt; w=$(mktemp -d)
source bench/h200_env.sh
gunzip -c .exp/K2.gz > /tmp/K2; chmod +x /tmp/K2
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $L
for dt in f32 f16 bf16; do
  echo "## /tmp/K2 sweep --seq 256,512,1024,2048,4096 --variants unfused-inplace,tiled,tiled-subgroup,tiled-coop --batch 8 --heads 16 --head-dim 64 --dtype $dt --reps 5 --out-dir sweep_$dt" >> $L
  timeout 100 /tmp/K2 sweep --seq 256,512,1024,2048,4096 --variants unfused-inplace,tiled,tiled-subgroup,tiled-coop --batch 8 --heads 16 --head-dim 64 --dtype $dt --reps 5 --out-dir $w/sweep_$dt >> $L 2>&1
  echo "## exit $? at ${SECONDS}s" >> $L
  tar czf $OUT/sweeps.tar.gz -C $w .
done
cat $L
