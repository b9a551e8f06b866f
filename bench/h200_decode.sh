#!/usr/bin/env bash
# Decode on the H200 (issue: shapes, the split-KV part), attn-wgpu and PyTorch in one lease, from
# the repository root with the release binary and the .gl loaders carried:
#   bash bench/h200_decode.sh BINARY OUTDIR
# B in {1, 16}, Hq 32, Hkv 8, D 128, N = 1, M in {4096, 16384, 65536}, f16, no causal mask (one
# query row sees every key: what bottom-right causal means for N = 1): every attn-wgpu variant
# (split-kv against the fused kernel with one workgroup per block of query rows) and PyTorch's
# flash / efficient / math / cuDNN / naive. Writes OUTDIR/decode.tar.gz (+ OUTDIR/log.txt).
source bench/h200_lib.sh
h200_begin "$@"
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  # Warm the GPU's clocks before the first timed run (it idles at 345 MHz).
  $B run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
  for b in 1 16; do
    for m in 4096 16384 65536; do
      S="--batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $m --no-causal --dtype f16"
      step $B run --variant all $S --reps 20 --json "$o/attn_decode_B${b}_M${m}.json"
      PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $S --reps 20 --variants naive,flash,efficient,math,cudnn --json "$o/torch_decode_B${b}_M${m}.json"
    done
  done
  # Bandwidth of split-kv against the bytes of K and V (M 16384: 64, 128, 256 MiB each, then
  # 512 MiB at B 16 above): where the streaming rate falls off.
  for b in 2 4 8; do
    step $B run --variant split-kv --batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 16384 --no-causal --dtype f16 --reps 20 --json "$o/attn_split_B${b}_M16384.json"
  done
  step $B explain --variant tiled,split-kv --batch 1 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 16384 --no-causal --dtype f16 --reps 10
} > "$log" 2>&1
h200_end decode
