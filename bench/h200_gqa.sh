#!/usr/bin/env bash
# Grouped-query and multi-query attention on the H200 (issue: shapes, the --kv-heads part),
# attn-wgpu and PyTorch in one lease, from the repository root with the release binary and the
# .gl loaders carried:
#   bash bench/h200_gqa.sh BINARY OUTDIR
# B8 H16 D64 causal N=1024: every variant with Hkv = 4 (GQA 4:1) and Hkv = 1 (MQA), forward f32 and
# f16 and the f16 training step, validated against the f64 oracle; PyTorch with enable_gqa=True
# (the naive code with repeat_interleave). Writes OUTDIR/gqa.tar.gz (+ OUTDIR/log.txt).
source bench/h200_lib.sh
h200_begin "$@"
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  for kv in 4 1; do
    for dt in f32 f16; do
      step $B run --variant all $SEED --kv-heads $kv --seq 1024 --dtype $dt --reps 10 --json "$o/attn_kv${kv}_${dt}_N1024.json"
    done
  done
  step $B run --variant all --backward $SEED --kv-heads 4 --seq 1024 --dtype f16 --reps 5 --json "$o/attn_bwd_kv4_f16_N1024.json"
  for kv in 4 1; do
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --kv-heads $kv --seq 1024 --dtype f16 --reps 10 --variants naive,flash,efficient,math --json "$o/torch_kv${kv}_f16_N1024.json"
  done
  PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --backward $SEED --kv-heads 4 --seq 1024 --dtype f16 --reps 5 --variants naive,flash,efficient --json "$o/torch_bwd_kv4_f16_N1024.json"
} > "$log" 2>&1
h200_end gqa
