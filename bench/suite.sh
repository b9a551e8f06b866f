#!/usr/bin/env bash
# The measurement suite: attn-wgpu and PyTorch (bench/torch_sdpa.py) on one GPU, in one lease, into
# the layout the repository keeps (docs/results.md):
#
#   bash bench/suite.sh BINARY ROOT [PART ...]
#
# PART: forward | training | training-wide | decode (the full suite, the default), and gqa | dropout
# (run when named).
#
# writes ROOT/<gpu>/suite/*.json (+ log.txt), where <gpu> is the GPU that actually ran (h100, h200, …,
# from nvidia-smi or the adapter's name). Each part fits one 10-minute device call; PyTorch runs first in
# each part, so a part cut short still has its baselines. A step whose JSON (or JSON.gz) already exists is skipped, so a
# part that was cut short resumes where it stopped when ROOT still holds its files. A full run replaces
# results/<gpu>/suite/ whole; `attn-wgpu compare` then writes results/<gpu>/README.md (docs/results.md).
#
# On the lent GPU machine (no Rust there): build here with `cargo build --release`, carry the binary and
# the .gl loaders; bench/device_env.sh unpacks the loaders and points at NVIDIA's ICD.
set -u
B=${1:?usage: bash bench/suite.sh BINARY ROOT [forward|training|decode ...]}
root=${2:?usage: bash bench/suite.sh BINARY ROOT [forward|training|decode ...]}
shift 2
parts=${*:-forward training training-wide decode}
for p in $parts; do
  case $p in forward | training | training-wide | decode | gqa | dropout) ;;
    *) echo "suite.sh: unknown part '$p' (forward, training, training-wide, decode, gqa, dropout)" >&2; exit 2 ;;
  esac
done
[ -x "$B" ] || { echo "suite.sh: binary '$B' is not an executable file" >&2; exit 2; }
if ls .gl/*.deb >/dev/null 2>&1; then source bench/device_env.sh; fi

# The folder is named after the GPU that ran: nvidia-smi's name where there is one, else the adapter's.
gpu_name() {
  local n
  n=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$n" ] || n=$("$B" adapters 2>/dev/null | sed -n 's/^\[0\] \(.*\) — .*/\1/p' | head -1)
  n=$(echo "${n:-unknown}" | tr 'A-Z' 'a-z')
  case $n in
    *h100*) echo h100 ;; *h200*) echo h200 ;; *a100*) echo a100 ;; *l40s*) echo l40s ;;
    *) echo "$n" | sed 's/[^a-z0-9]\+/-/g; s/^-//; s/-$//' | cut -c1-40 ;;
  esac
}
gpu=$(gpu_name)
o="$root/$gpu/suite"
mkdir -p "$o"
log="$o/log.txt"
echo "GPU: $gpu -> $o"

SEED="--batch 8 --heads 16 --head-dim 64"
# step OUT.json CMD ...: run CMD unless OUT.json exists (resume), log it between "## CMD" and "## exit N (T s)".
step() {
  local out=$1; shift
  if [ -n "$out" ] && { [ -f "$out" ] || [ -f "$out.gz" ]; }; then echo "## skip (exists): $out" >>"$log"; return 0; fi
  local t0=$SECONDS
  { echo "## $*"; "$@"; echo "## exit $? ($((SECONDS - t0)) s)"; } >>"$log" 2>&1
  tail -n 1 "$log"
}
torch() { PYTHONUNBUFFERED=1 step "$1" python3 bench/torch_sdpa.py "${@:2}" --json "$1"; }
attn() { step "$1" "$B" run "${@:2}" --json "$1"; }

forward() {
  echo "## nvidia-smi" >>"$log"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >>"$log" 2>&1
  # Warm the clocks (the GPU idles at 345 MHz) before the first timed run.
  "$B" run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
  for dt in f32 f16 bf16; do torch "$o/torch_${dt}_N1024.json" $SEED --seq 1024 --dtype $dt; done
  torch "$o/torch_f16_N4096.json" $SEED --seq 4096 --dtype f16 --reps 10 --variants naive-inplace,math,flash,efficient,cudnn
  for d in 128 256; do for dt in f16 bf16; do
    torch "$o/torch_${dt}_N1024_D$d.json" --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype $dt --reps 10
  done; done
  for d in 128 256; do
    torch "$o/torch_f32_N1024_D$d.json" --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype f32 --reps 10 --variants naive-inplace,efficient
  done
  step "$o/adapters.txt" sh -c "\"$B\" adapters > \"$o/adapters.txt\""
  step "$o/probe.json" "$B" probe --out "$o/probe.json"
  attn "$o/attn_f32_N1024.json" --variant all $SEED --seq 1024 --dtype f32 --probe "$o/probe.json"
  for dt in f16 bf16; do attn "$o/attn_${dt}_N1024.json" --variant all $SEED --seq 1024 --dtype $dt --probe "$o/probe.json"; done
  attn "$o/attn_f16_N4096.json" --variant all $SEED --seq 4096 --dtype f16 --reps 10 --probe "$o/probe.json"
  for d in 128 256; do for dt in f16 bf16; do
    attn "$o/attn_${dt}_N1024_D$d.json" --variant all --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype $dt --reps 10 --probe "$o/probe.json"
  done; done
  for d in 128 256; do
    attn "$o/attn_f32_N1024_D$d.json" --variant all --batch 8 --heads 16 --head-dim $d --seq 1024 --dtype f32 --reps 10 --probe "$o/probe.json"
  done
}

training() {
  "$B" run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
  for dt in f32 f16 bf16; do torch "$o/torch_bwd_${dt}_N1024.json" --backward $SEED --seq 1024 --dtype $dt --reps 10; done
  torch "$o/torch_bwd_f16_N4096.json" --backward $SEED --seq 4096 --dtype f16 --reps 5 --variants naive-inplace,flash,efficient,cudnn
  for dt in f32 f16 bf16; do attn "$o/attn_bwd_${dt}_N1024.json" --variant all --backward $SEED --seq 1024 --dtype $dt --reps 10; done
  # `run --variant` takes one name (or all): one file per variant at N = 4096.
  for v in unfused-inplace tiled tiled-coop tiled-coop-vk; do
    attn "$o/attn_bwd_f16_N4096_$v.json" --variant $v --backward $SEED --seq 4096 --dtype f16 --reps 5
  done
}

# The training step at the wide heads (D = 128, 256), f16, bf16 and f32: a part of
# its own, since the H200 took 221 s for PyTorch's half of `training` alone.
training-wide() {
  "$B" run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
  W="--backward --batch 8 --heads 16 --seq 1024 --reps 5"
  for d in 128 256; do for dt in f16 bf16; do
    torch "$o/torch_bwd_${dt}_N1024_D$d.json" $W --head-dim $d --dtype $dt
  done; done
  for d in 128 256; do
    torch "$o/torch_bwd_f32_N1024_D$d.json" $W --head-dim $d --dtype f32 --variants naive-inplace,efficient
  done
  for d in 128 256; do for dt in f16 bf16; do
    attn "$o/attn_bwd_${dt}_N1024_D$d.json" --variant all $W --head-dim $d --dtype $dt
  done; done
  for d in 128 256; do
    attn "$o/attn_bwd_f32_N1024_D$d.json" --variant all $W --head-dim $d --dtype f32
  done
}

decode() {
  "$B" run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
  for b in 1 16; do for m in 4096 65536; do
    S="--batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $m --no-causal --dtype f16"
    torch "$o/torch_decode_B${b}_M${m}.json" $S --reps 20 --variants naive,flash,efficient,math,cudnn
    attn "$o/attn_decode_B${b}_M${m}.json" --variant all $S --reps 20
  done; done
}

# Grouped-query (Hkv 4) and multi-query (Hkv 1) attention, forward f16 and the f16 training step.
gqa() {
  for kv in 4 1; do
    torch "$o/torch_kv${kv}_f16_N1024.json" $SEED --kv-heads $kv --seq 1024 --dtype f16 --reps 10 --variants naive,flash,efficient,math
    attn "$o/attn_kv${kv}_f16_N1024.json" --variant all $SEED --kv-heads $kv --seq 1024 --dtype f16 --reps 10
  done
  torch "$o/torch_bwd_kv4_f16_N1024.json" --backward $SEED --kv-heads 4 --seq 1024 --dtype f16 --reps 5 --variants naive,flash,efficient
  attn "$o/attn_bwd_kv4_f16_N1024.json" --variant all --backward $SEED --kv-heads 4 --seq 1024 --dtype f16 --reps 5
}

# Dropout 0.1 (PyTorch timed only: its RNG cannot reproduce our keep mask, docs/training.md).
dropout() {
  torch "$o/torch_drop_f16_N1024.json" $SEED --seq 1024 --dtype f16 --dropout 0.1 --reps 20 --variants naive,flash,efficient,math
  for dt in f32 f16; do
    attn "$o/attn_drop_${dt}_N1024.json" --variant all $SEED --seq 1024 --dtype $dt --dropout 0.1 --mode train --reps 10
  done
  attn "$o/attn_drop_bwd_f16_N1024.json" --variant all --backward $SEED --seq 1024 --dtype f16 --dropout 0.1 --reps 5
}

for p in $parts; do
  t0=$SECONDS
  echo "## part $p" >>"$log"
  $p
  echo "## part $p done ($((SECONDS - t0)) s)" | tee -a "$log"
done
