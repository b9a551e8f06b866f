#!/usr/bin/env bash
# The H200 measurement suite: the committed results/h200 files come from this script, run on the
# lent machine from the repository root with the release binary and the .gl loaders carried:
#   bash bench/h200_suite.sh BINARY OUTDIR
# It probes the adapter, runs attn-wgpu (f32/f16/bf16 at the seed's shape, every variant; f16 at
# N=4096; D = 128 and 256 at f16; a sweep over N for each dtype; explain at the seed's shape) and
# the PyTorch baseline
# (bench/torch_sdpa.py) in the same lease, so the numbers share one GPU state. Everything lands
# in OUTDIR/h200.tar.gz (+ OUTDIR/log.txt). The training step and dropout are their own scripts
# (bench/h200_backward.sh, bench/h200_dropout.sh): each of the three fits one 10-minute device
# call, the three together do not.
source bench/h200_lib.sh
h200_begin "$@"
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  step $B adapters
  step $B probe --out "$o/probe.json"
  step $B run --variant all $SEED --seq 1024 --dtype f32 --probe "$o/probe.json" --json "$o/attn_f32_N1024.json" --trace "$o/trace_f32_N1024.json"
  for dt in f16 bf16; do
    step $B run --variant all $SEED --seq 1024 --dtype $dt --probe "$o/probe.json" --json "$o/attn_${dt}_N1024.json"
  done
  for dt in f32 f16 bf16; do
    step $B run --variant auto $SEED --seq 1024 --dtype $dt --reps 3
  done
  step $B run --variant all $SEED --seq 4096 --dtype f16 --reps 10 --probe "$o/probe.json" --json "$o/attn_f16_N4096.json"
  step $B run --variant tiled $SEED --seq 4096 --dtype f32 --reps 10 --json "$o/attn_f32_N4096_tiled.json"
  # Wider heads (D = 128, 256): the fused kernels against the materialized ones and PyTorch.
  for d in 128 256; do
    step $B run --variant all --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype f16 --reps 10 --probe "$o/probe.json" --json "$o/attn_f16_N1024_D$d.json"
  done
  # PyTorch before the long sweeps, so a run cut short still has its baselines.
  for dt in f32 f16 bf16; do
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype $dt --json "$o/torch_${dt}_N1024.json"
  done
  PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 4096 --dtype f16 --reps 10 --variants naive-inplace,math,flash,efficient,cudnn --json "$o/torch_f16_N4096.json"
  for d in 128 256; do
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype f16 --reps 10 --json "$o/torch_f16_N1024_D$d.json"
  done
  step $B tune $SEED --seq 1024 --dtype f32 --reps 5 --out "$o/tune.json"
  for dt in f32 f16 bf16; do
    step $B sweep --seq 256,512,1024,2048,4096 --variants unfused-inplace,tiled,tiled-subgroup,tiled-coop,tiled-coop-vk $SEED --dtype $dt --reps 5 --out-dir "$o/sweep_$dt"
  done
  step $B explain --variant unfused,unfused-inplace,tiled $SEED --seq 1024 --dtype f32
} > "$log" 2>&1
h200_end h200
