#!/usr/bin/env bash
# Lease 4: tiled-coop without the unused lo tile (LO = 0: 34818 instead of 43008 bytes of
# workgroup storage) and masking only blocks that need it (MASK_ALL = 0), against the v17 binary.
set -u
out=$1; mkdir -p $out
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
for n in 1024 4096; do
  for r in 1 2; do
    step .exp/final run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --json $out/coop_N${n}_v17_r$r.json
    step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --json $out/coop_N${n}_new_r$r.json
  done
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override MASK_ALL=1 --json $out/coop_N${n}_new_maskall.json
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO=2 --json $out/coop_N${n}_new_lo2.json
done
B=.exp/new
step $B run --variant tiled-coop --batch 1 --heads 2 --seq 1 --head-dim 64 --dtype f16 --reps 2
step $B run --variant tiled-coop --batch 2 --heads 4 --seq 256 --head-dim 64 --dtype f16 --bounds-checks on --reps 2
step $B run --variant tiled-coop --batch 3 --heads 5 --seq 129 --head-dim 64 --dtype f16 --no-causal --reps 2
step $B run --variant tiled-coop --batch 2 --heads 2 --seq 64 --head-dim 32 --dtype f16 --key-padding 1,64 --reps 2
step $B run --variant tiled-coop --batch 2 --heads 2 --seq 300 --head-dim 64 --dtype f16 --key-padding 7,300 --reps 2
step $B run --variant tiled-coop --batch 1 --heads 2 --seq 4096 --head-dim 16 --dtype f16 --reps 2
step $B run --variant tiled-coop --batch 1 --heads 1 --seq 1000 --head-dim 48 --dtype f16 --scale 4.0 --no-causal --reps 2
step $B run --variant tiled-coop --batch 2 --heads 3 --seq 200 --head-dim 64 --dtype f16 --reps 2 --override LO=2 --tolerance strict
step $B run --variant all --batch 2 --heads 2 --seq 128 --head-dim 64 --dtype f16 --reps 2
} > $out/log.txt 2>&1
grep -E "^(## [^e]|Validation|Forward GPU|Tolerance)" $out/log.txt | grep -v "## exit 0" | cut -c1-120 > $out/summary.txt
grep -c "Validation  : PASS" $out/log.txt; grep -c "FAIL" $out/log.txt; grep -E "^(## .*--seq (1024|4096) .*coop|Forward GPU)" $out/log.txt | sed 's/--batch 8 --heads 16 --head-dim 64//' | cut -c1-120 | head -24
