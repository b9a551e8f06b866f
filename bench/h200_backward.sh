#!/usr/bin/env bash
# The training-step measurements on the H200 (issue: backward), attn-wgpu and PyTorch in one
# lease, from the repository root with the release binary and the .gl loaders carried:
#   bash bench/h200_backward.sh BINARY OUTDIR
# attn-wgpu: every variant with --backward at the seed's shape (f32, f16, bf16), `tiled` and `unfused-inplace`
# at N=4096 (f32, f16) and `tiled-coop`, `tiled-coop-vk` at N=4096 (f16), `explain --backward`; PyTorch's backward likewise.
# OUTDIR/backward.tar.gz (+ OUTDIR/log.txt).
source bench/h200_lib.sh
h200_begin "$@"
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  # PyTorch first, so a run cut short still has its baselines.
  for dt in f32 f16; do
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --backward $SEED --seq 1024 --dtype $dt --reps 10 --json "$o/torch_bwd_${dt}_N1024.json"
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --backward $SEED --seq 4096 --dtype $dt --reps 5 --variants naive-inplace,flash,efficient,cudnn --json "$o/torch_bwd_${dt}_N4096.json"
  done
  for dt in f32 f16; do
    step $B run --variant all --backward $SEED --seq 1024 --dtype $dt --reps 10 --json "$o/attn_bwd_${dt}_N1024.json"
  done
  step $B run --variant all --backward $SEED --seq 1024 --dtype bf16 --reps 10 --json "$o/attn_bwd_bf16_N1024.json"
  for dt in f32 f16; do
    for v in tiled unfused-inplace; do
      step $B run --variant $v --backward $SEED --seq 4096 --dtype $dt --reps 5 --json "$o/attn_bwd_${dt}_N4096_$v.json"
    done
  done
  for v in tiled-coop tiled-coop-vk; do
    step $B run --variant $v --backward $SEED --seq 4096 --dtype f16 --reps 5 --json "$o/attn_bwd_f16_N4096_$v.json"
  done
  step $B explain --backward --variant unfused,unfused-inplace,tiled $SEED --seq 1024 --dtype f32 --reps 5
} > "$log" 2>&1
h200_end backward
