#!/usr/bin/env bash
# Lease 2: tiled-coop at D = 64 in one lease: D = before wide heads (commit 49d… HEAD~1, the
# v17-v25 kernel), A = wide heads with arrays of matrices, E = wide heads with named private
# matrices, F = E with sl sized by LO (P in one f16 frees 8 KiB). Then E/F at D 128/256.
set -u
OUT=${1:?}; mkdir -p $OUT; o=$(mktemp -d)
source bench/h200_env.sh
for x in A D E F; do gunzip -c .exp/$x.gz > /tmp/$x; chmod +x /tmp/$x; done
SEED="--batch 8 --heads 16"
step() { echo "## $*"; "$@" 2>&1 | grep -E "^(tiled|split|error|Error)|rror" | cut -c1-150; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
/tmp/A run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
for r in 1 2; do for bin in D A E F; do for n in 1024 4096; do
  step /tmp/$bin run --variant tiled-coop $SEED --head-dim 64 --seq $n --dtype f16 --reps 20 --json $o/coop_${bin}_D64_N${n}_r$r.json
done; done; done
for bin in A E F; do for d in 128 256; do
  step /tmp/$bin run --variant tiled-coop $SEED --head-dim $d --seq 1024 --dtype f16 --reps 20 --json $o/coop_${bin}_D${d}_N1024.json
done; done
for bin in E F; do step /tmp/$bin run --variant tiled-coop $SEED --head-dim 128 --seq 4096 --dtype f16 --reps 10 --json $o/coop_${bin}_D128_N4096.json; done
step /tmp/F run --variant tiled-coop $SEED --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900
step /tmp/F run --variant tiled-coop $SEED --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
step /tmp/F run --variant tiled-coop $SEED --head-dim 128 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
} > $o/log.txt 2>&1
cp $o/log.txt $OUT/; tar czf $OUT/r2.tar.gz -C $o .
cat $o/log.txt
