#!/usr/bin/env bash
# Lease 5: tiled-coop: the lo tile's load guarded by LO (v18's kernel read it unguarded from a
# 1-element array and failed validation), the lo tile dropped with LO = 0 (LO_TILE), masking only
# blocks that need it (MASK_ALL), against the v17 binary.
set -u
out=$1; o=$(mktemp -d)
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
for n in 1024 4096; do
  for r in 1 2; do
    step .exp/final run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --json $o/coop_N${n}_v17_r$r.json
    step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --json $o/coop_N${n}_default_r$r.json
  done
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO_TILE=1 --override MASK_ALL=1 --json $o/coop_N${n}_guard_only.json
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO_TILE=1 --json $o/coop_N${n}_guard_masktrim.json
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override MASK_ALL=1 --json $o/coop_N${n}_guard_notile.json
  step .exp/new run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO=2 --json $o/coop_N${n}_lo2.json
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
} > $o/log.txt 2>&1
mkdir -p $out; cp $o/log.txt $out/; tar czf $out/e5.tar.gz -C $o .
echo "PASS lines: $(grep -c 'Validation  : PASS' $o/log.txt); FAIL verdict lines: $(grep -c 'Validation  : FAIL' $o/log.txt)"
grep -E "^(## .*--seq (1024|4096) .*coop|Forward GPU|Validation  : FAIL)" $o/log.txt | sed 's/--batch 8 --heads 16 --head-dim 64//;s/--json.*//' | cut -c1-110
