#!/usr/bin/env bash
# Dropout on the H200 (issue: dropout), attn-wgpu and PyTorch in one lease, from the repository
# root with the release binary and the .gl loaders carried:
#   bash bench/h200_dropout.sh BINARY OUTDIR [all|attn|torch]
# (attn / torch: only that half, for device calls shorter than the whole; default all)
# attn-wgpu: every variant with --dropout 0.1 at the seed's shape (forward f32/f16, training
# f32/f16), validated element-wise against the f64 reference with the same keep mask; the cost of
# dropout for `tiled` and `tiled-coop`: --dropout 0 and 0.1 back to back at N = 1024 and 4096.
# PyTorch: flash / efficient / math (and the naive code) with dropout_p = 0.1 and 0, timed only
# (its RNG cannot reproduce our keep mask). Writes OUTDIR/dropout.tar.gz (+ OUTDIR/log.txt).
source bench/h200_lib.sh
h200_begin "$@"
part=${3:-all}
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  if [ "$part" != torch ]; then
  for dt in f32 f16; do
    step $B run --variant all $SEED --seq 1024 --dtype $dt --dropout 0.1 --mode train --reps 10 --json "$o/attn_drop_${dt}_N1024.json"
    step $B run --variant all --backward $SEED --seq 1024 --dtype $dt --dropout 0.1 --reps 5 --json "$o/attn_drop_bwd_${dt}_N1024.json"
  done
  for n in 1024 4096; do
    for p in 0 0.1; do
      for dt in f32 f16; do
        step $B run --variant tiled $SEED --seq $n --dtype $dt --dropout $p --mode train --reps 20 --json "$o/attn_tiled_${dt}_N${n}_p$p.json"
      done
      step $B run --variant tiled-coop $SEED --seq $n --dtype f16 --dropout $p --mode train --reps 20 --json "$o/attn_coop_f16_N${n}_p$p.json"
      step $B run --variant tiled --backward $SEED --seq $n --dtype f16 --dropout $p --reps 5 --json "$o/attn_tiled_bwd_f16_N${n}_p$p.json"
    done
  done
  step $B explain --variant unfused,tiled $SEED --seq 1024 --dtype f16 --dropout 0.1 --reps 5
  fi
  if [ "$part" != attn ]; then
  for p in 0 0.1; do
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype f16 --dropout $p --reps 20 --variants naive,flash,efficient,math --json "$o/torch_f16_N1024_p$p.json"
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype f32 --dropout $p --reps 20 --variants naive,efficient,math --json "$o/torch_f32_N1024_p$p.json"
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 4096 --dtype f16 --dropout $p --reps 10 --variants flash,efficient --json "$o/torch_f16_N4096_p$p.json"
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 4096 --dtype f32 --dropout $p --reps 10 --variants efficient --json "$o/torch_f32_N4096_p$p.json"
    PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --backward $SEED --seq 1024 --dtype f16 --dropout $p --reps 5 --variants flash,efficient --json "$o/torch_bwd_f16_N1024_p$p.json"
  done
  fi
} > "$log" 2>&1
h200_end dropout
