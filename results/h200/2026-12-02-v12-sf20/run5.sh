#!/usr/bin/env bash
# tiled-coop A/B: the first binary (HEAD) against the others; small validation shapes for the others.
set -u
out=$1; shift; o=$(mktemp -d)
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
  for bin in "$@"; do
    tag=$(basename $bin)
    step $bin run --variant tiled-coop $SEED --seq 1024 --dtype f16 --json "$o/coop_${tag}_N1024.json"
    step $bin run --variant tiled-coop $SEED --seq 4096 --dtype f16 --reps 10 --json "$o/coop_${tag}_N4096.json"
  done
  for bin in "${@:2}"; do
  for args in "--batch 2 --heads 3 --seq 100 --head-dim 32" "--batch 2 --heads 3 --seq 100 --head-dim 48 --no-causal" \
              "--batch 2 --heads 3 --seq 77 --head-dim 16 --key-padding 5,70" "--batch 2 --heads 2 --seq 300 --head-dim 64 --key-padding 0,200 --no-causal" \
              "--batch 2 --heads 4 --seq 512 --head-dim 64 --scale 2.0" "--batch 1 --heads 2 --seq 2048 --head-dim 64 --scale 0.5"; do
    step $bin run --variant tiled-coop $args --dtype f16 --reps 2
  done
  done
} > "$o/log.txt" 2>&1
mkdir -p "$out"; cp "$o/log.txt" "$out/log.txt"; tar czf "$out/ab.tar.gz" -C "$o" .
grep -hE "^(## [^e]|attention|Validation)" "$o/log.txt" | grep -v "^## exit 0" | cut -c1-140
