#!/usr/bin/env bash
# Lease 1: tiled v2 (rt2) A/B vs rt, BC 64 vs 32 (bin B), tiled-coop LO=2 vs LO=0 (bin B), edge validation, sweeps.
set -u
out=$1; mkdir -p $out
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
grab() { grep -E "^(== |   tile|Validation|GPU|  median|.*unsupported|.*error)" ; }
{
step .exp/A adapters 2>&1 | head -30
for dt in f32 f16 bf16; do
  for b in A B; do
    step .exp/$b sweep --seq 1024 --variants unfused-inplace,tiled,tiled-coop --dtype $dt $SEED --reps 10 --out-dir $out/ab_${b}_${dt}
  done
  step .exp/A sweep --seq 1024 --variants tiled --tile rt --dtype $dt $SEED --reps 10 --out-dir $out/ab_rt_${dt}
done
} > $out/ab.txt 2>&1
{
for dt in f32 f16 bf16; do
 step .exp/A run --variant tiled --batch 1 --heads 2 --seq 1 --head-dim 64 --dtype $dt --reps 2
 step .exp/A run --variant tiled --batch 2 --heads 4 --seq 256 --head-dim 64 --dtype $dt --bounds-checks on --reps 2
 step .exp/A run --variant tiled --batch 3 --heads 5 --seq 129 --head-dim 64 --dtype $dt --no-causal --reps 2
 step .exp/A run --variant tiled --batch 2 --heads 2 --seq 64 --head-dim 32 --dtype $dt --key-padding 1,64 --reps 2
 step .exp/A run --variant tiled --batch 1 --heads 2 --seq 4096 --head-dim 16 --dtype $dt --reps 2
 step .exp/A run --variant tiled --batch 1 --heads 1 --seq 1000 --head-dim 48 --dtype $dt --scale 4.0 --no-causal --reps 2
 step .exp/A run --variant tiled --batch 2 --heads 3 --seq 77 --head-dim 8 --dtype $dt --reps 2
 step .exp/A run --variant tiled --batch 2 --heads 3 --seq 100 --head-dim 40 --dtype $dt --no-causal --reps 2
done
step .exp/B run --variant tiled-coop --batch 2 --heads 4 --seq 1024 --head-dim 64 --dtype f16 --reps 2
step .exp/B run --variant tiled-coop --batch 3 --heads 5 --seq 129 --head-dim 64 --dtype f16 --no-causal --reps 2
step .exp/B run --variant tiled-coop --batch 1 --heads 1 --seq 1000 --head-dim 48 --dtype f16 --scale 4.0 --no-causal --reps 2
} > $out/edge.txt 2>&1
grep -E "^## [^e]|Validation|unsupported|rror" $out/edge.txt | grep -v "## exit 0" | cut -c1-110 > $out/edge_summary.txt
for dt in f32 f16 bf16; do
  step .exp/A sweep --seq 256,512,2048,4096 --variants unfused-inplace,tiled --dtype $dt $SEED --reps 5 --out-dir $out/sweep_$dt > $out/sweep_$dt.txt 2>&1
done
PYTHONUNBUFFERED=1 timeout 120 python3 bench/test_torch_sdpa.py > $out/test_torch.txt 2>&1; echo "test_torch exit $?" >> $out/test_torch.txt
