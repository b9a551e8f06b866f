#!/usr/bin/env bash
# Lease 4 (second call; the first, run4.sh, ran past its 600 s and returned nothing — J, 8
# subgroups a workgroup, is the suspect): H against I only, every step under its own timeout,
# the log written to OUTDIR as it goes; checks of I; then the suite with I if I wins.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
for x in H I; do gunzip -c .exp/$x.gz > .exp/$x; chmod +x .exp/$x; done
SEED="--batch 8 --heads 16"
step() { echo "## $*" >> $L; timeout 60 "$@" 2>&1 | grep -E "^(tiled|split|unfused|math|error|Error)|rror" | cut -c1-150 >> $L; echo "## rc ${PIPESTATUS[0]} at ${SECONDS}s" >> $L; }
for bin in H I H I; do for n in 1024 4096; do
  step .exp/$bin run --variant tiled-coop $SEED --head-dim 64 --seq $n --dtype f16 --reps 20
done; done
for bin in H I; do step .exp/$bin run --variant tiled-coop $SEED --head-dim 128 --seq 1024 --dtype f16 --reps 20; done
step .exp/I run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
step .exp/I run --variant tiled-coop $SEED --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
step .exp/I run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
step .exp/I run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 128 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5
step .exp/I run --variant tiled-coop --batch 3 --heads 5 --head-dim 48 --seq 77 --dtype f16 --reps 5 --no-causal
step .exp/I run --variant tiled-coop $SEED --head-dim 256 --seq 1024 --dtype f16 --reps 10
cat $L
