#!/usr/bin/env bash
# tiled-coop staging A/B: B (16-byte loads + scalar f16 stores, main) vs C (cooperative-matrix
# staging), validation on odd shapes, PyTorch fused baselines in the same lease.
set -u
Bb=$1; C=$2; out=$3; o=$(mktemp -d)
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
  for bin in $Bb $C; do
    tag=$(basename $bin)
    step $bin run --variant tiled-coop $SEED --seq 1024 --dtype f16 --json "$o/coop_${tag}_N1024.json"
    step $bin run --variant tiled-coop $SEED --seq 4096 --dtype f16 --reps 10 --json "$o/coop_${tag}_N4096.json"
    for args in "--batch 2 --heads 3 --seq 100 --head-dim 32" "--batch 2 --heads 3 --seq 100 --head-dim 48 --no-causal" \
                "--batch 2 --heads 3 --seq 77 --head-dim 16 --key-padding 5,70" "--batch 2 --heads 2 --seq 300 --head-dim 64 --key-padding 0,200 --no-causal" \
                "--batch 2 --heads 4 --seq 512 --head-dim 64 --scale 2.0" "--batch 1 --heads 2 --seq 2048 --head-dim 64 --scale 0.5"; do
      step $bin run --variant tiled-coop $args --dtype f16 --reps 2
    done
  done
  PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype f16 --variants flash,efficient,cudnn --json "$o/torch_f16_N1024.json"
  PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --seq 4096 --dtype f16 --reps 10 --variants flash,efficient,cudnn --json "$o/torch_f16_N4096.json"
} > "$o/log.txt" 2>&1
mkdir -p "$out"; cp "$o/log.txt" "$out/log.txt"; tar czf "$out/ab.tar.gz" -C "$o" .
grep -hE "^(## [^e]|attention|Validation|flash|efficient|cudnn)" "$o/log.txt" | grep -v "^## exit 0" | cut -c1-150
