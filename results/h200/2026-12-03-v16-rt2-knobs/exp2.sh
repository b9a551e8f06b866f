#!/usr/bin/env bash
# Lease 2: rt2 knobs (HD specialization, register prefetch, BC 32/64) at f32/f16/bf16 N=1024, and
# tiled-coop LO=0 (new default) vs LO=2 at N=1024 and 4096; every run validated.
set -u
B=${1:?binary}; out=$2; o=$(mktemp -d)
source bench/h200_env.sh
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
for dt in f32 f16 bf16; do
  i=0
  for knobs in "" "--override HD=0" "--override PREFETCH=1" "--tile rt2:64" "--tile rt2:64 --override PREFETCH=1"; do
    i=$((i+1))
    step $B run --variant tiled $SEED --seq 1024 --dtype $dt --reps 20 $knobs --json $o/tiled_${dt}_k$i.json
  done
done
for n in 1024 4096; do
  for lo in 0 2; do
    step $B run --variant tiled-coop $SEED --seq $n --dtype f16 --reps 10 --override LO=$lo --json $o/coop_N${n}_LO$lo.json
  done
done
} > $o/log.txt 2>&1
mkdir -p $out; cp $o/log.txt $out/; tar czf $out/exp2.tar.gz -C $o .
grep -E "^(## [^e]|   tile|   config|Validation|Forward GPU|Tolerance)" $o/log.txt | grep -v "## exit 0" | cut -c1-150
