#!/usr/bin/env bash
# The H200 measurement suite: every committed results/h200 file comes from this script, run on the
# lent machine from the repository root with the release binary and the .gl loaders carried:
#   bash bench/h200_suite.sh OUTDIR
# It runs attn-wgpu (f32, seed shape, all variants; tiled at N=4096) and the PyTorch baseline
# (bench/torch_sdpa.py) in the same lease, so the numbers share one GPU state.
set -u
out=${1:?usage: bench/h200_suite.sh OUTDIR}
mkdir -p "$out"
source bench/h200_env.sh
B=target/release/attn-wgpu
SEED="--batch 8 --heads 16 --head-dim 64"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
$B adapters > "$out/adapters.txt" 2>&1
$B run --variant all $SEED --seq 1024 --json "$out/attn_f32_N1024.json" > "$out/attn_f32_N1024.txt" 2>&1
$B run --variant tiled $SEED --seq 4096 --reps 10 --json "$out/attn_f32_N4096.json" > "$out/attn_f32_N4096.txt" 2>&1
PYTHONUNBUFFERED=1 python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype f32 --json "$out/torch_f32_N1024.json" > "$out/torch_f32_N1024.txt" 2>&1
grep -hE "^(unfused|tiled|qk|pv|scale|copy|mask|softmax|attention) " "$out"/attn_f32_N1024.txt
grep -hE "^attention" "$out"/attn_f32_N4096.txt
tail -8 "$out/torch_f32_N1024.txt"
