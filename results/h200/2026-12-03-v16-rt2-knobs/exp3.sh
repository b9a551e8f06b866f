#!/usr/bin/env bash
# Lease 3: tiled-coop LO=0 (default) vs LO=2 at N=1024/4096; rt2 with PREFETCH=1 (new default) on edge shapes.
set -u
B=${1:?binary}; out=$2; mkdir -p $out
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
for n in 1024 4096; do
  for lo in 0 2; do
    step $B run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO=$lo --json $out/coop_N${n}_LO$lo.json
  done
done
for dt in f32 f16 bf16; do
 step $B run --variant tiled --batch 1 --heads 2 --seq 1 --head-dim 64 --dtype $dt --reps 2
 step $B run --variant tiled --batch 2 --heads 4 --seq 256 --head-dim 64 --dtype $dt --bounds-checks on --reps 2
 step $B run --variant tiled --batch 3 --heads 5 --seq 129 --head-dim 64 --dtype $dt --no-causal --reps 2
 step $B run --variant tiled --batch 2 --heads 2 --seq 64 --head-dim 32 --dtype $dt --key-padding 1,64 --reps 2
 step $B run --variant tiled --batch 1 --heads 2 --seq 4096 --head-dim 16 --dtype $dt --reps 2
 step $B run --variant tiled --batch 1 --heads 1 --seq 1000 --head-dim 48 --dtype $dt --scale 4.0 --no-causal --reps 2
 step $B run --variant tiled --batch 2 --heads 3 --seq 77 --head-dim 8 --dtype $dt --reps 2
 step $B run --variant tiled --batch 2 --heads 3 --seq 100 --head-dim 40 --dtype $dt --no-causal --reps 2
done
} > $out/log.txt 2>&1
grep -E "^(## [^e]|Validation|Forward GPU|Tolerance)" $out/log.txt | grep -v "## exit 0" | cut -c1-120 > $out/summary.txt
grep -c "Validation  : PASS" $out/log.txt; grep -E "^(## .*coop|Forward GPU|Tolerance)" $out/log.txt | head -12 | cut -c1-150
