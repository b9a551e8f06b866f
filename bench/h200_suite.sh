#!/usr/bin/env bash
# The H200 measurement suite: the committed results/h200 files come from this script, run on the
# lent machine from the repository root with the release binary and the .gl loaders carried:
#   bash bench/h200_suite.sh BINARY OUTDIR
# attn-wgpu (f32/f16/bf16 at the seed's shape, all variants; tiled at N=4096) and the PyTorch
# baseline (bench/torch_sdpa.py) run in the same lease, so the numbers share one GPU state.
set -u
B=${1:?usage: bench/h200_suite.sh BINARY OUTDIR}
out=${2:?usage: bench/h200_suite.sh BINARY OUTDIR}
mkdir -p "$out"
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
log="$out/log.txt"
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  echo "## adapters"; $B adapters
  for dt in f32 f16 bf16; do
    echo "## $B run --variant all $SEED --seq 1024 --dtype $dt --json $out/attn_${dt}_N1024.json"
    $B run --variant all $SEED --seq 1024 --dtype $dt --json "$out/attn_${dt}_N1024.json"
    echo "## $B run --variant auto $SEED --seq 1024 --dtype $dt --reps 3"
    $B run --variant auto $SEED --seq 1024 --dtype $dt --reps 3 | grep -iE "auto|picked|not picked|reason|  " | head -20
  done
  echo "## $B run --variant all $SEED --seq 4096 --dtype f16 --reps 10 --json $out/attn_f16_N4096.json"
  $B run --variant all $SEED --seq 4096 --dtype f16 --reps 10 --json "$out/attn_f16_N4096.json"
  for dt in f32 f16; do
    echo "## python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype $dt --json $out/torch_${dt}_N1024.json"
    PYTHONUNBUFFERED=1 python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype $dt --json "$out/torch_${dt}_N1024.json"
  done
} > "$log" 2>&1
grep -hE "^(== |unfused|tiled|math|qk|pv|scale|copy|mask|softmax|attention|Validation|variant|naive|flash|efficient|cudnn)" "$log" | grep -v "^Validation  : PASS" | cut -c1-150
