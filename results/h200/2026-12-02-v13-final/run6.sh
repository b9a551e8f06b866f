#!/usr/bin/env bash
# Final tiled-coop validation on the remaining edge shapes (final binary).
set -u
B=$1; out=$2; o=$(mktemp -d)
source bench/h200_env.sh
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
  step $B run --variant tiled-coop --batch 1 --heads 2 --seq 1 --head-dim 64 --dtype f16 --reps 2
  step $B run --variant tiled-coop --batch 2 --heads 4 --seq 256 --head-dim 64 --dtype f16 --bounds-checks on --reps 2
  step $B run --variant tiled-coop --batch 3 --heads 5 --seq 129 --head-dim 64 --dtype f16 --no-causal --reps 2
  step $B run --variant tiled-coop --batch 2 --heads 2 --seq 64 --head-dim 32 --dtype f16 --key-padding 1,64 --reps 2
  step $B run --variant tiled-coop --batch 1 --heads 2 --seq 4096 --head-dim 16 --dtype f16 --reps 2
  step $B run --variant tiled-coop --batch 1 --heads 1 --seq 1000 --head-dim 48 --dtype f16 --scale 4.0 --no-causal --reps 2
  step $B run --variant all --batch 2 --heads 2 --seq 128 --head-dim 64 --dtype f16 --reps 2
} > "$o/log.txt" 2>&1
mkdir -p "$out"; cp "$o/log.txt" "$out/log.txt"
grep -hE "^(## [^e]|Validation|.*unsupported)" "$o/log.txt" | grep -v "^## exit 0" | cut -c1-160
