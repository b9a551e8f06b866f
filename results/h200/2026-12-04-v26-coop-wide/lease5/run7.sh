#!/usr/bin/env bash
# Lease 5: K (the committed kernel: H's with the block fixed at 16 keys, the 32/64-key paths
# removed) against H (the v27 suite's binary), and K's checks.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
for x in H K; do gunzip -c .exp/$x.gz > /tmp/$x; chmod +x /tmp/$x; done
SEED="--batch 8 --heads 16"
step() { echo "## $*" >> $L; timeout 40 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror" | cut -c1-150 >> $L; }
for bin in H K H K; do for s in "--head-dim 64 --seq 1024" "--head-dim 64 --seq 4096"; do
  step /tmp/$bin run --variant tiled-coop $SEED $s --dtype f16 --reps 20; done; done
for bin in H K; do for d in 128 256; do step /tmp/$bin run --variant tiled-coop $SEED --head-dim $d --seq 1024 --dtype f16 --reps 20; done; done
step /tmp/K run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
step /tmp/K run --variant tiled-coop $SEED --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
step /tmp/K run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
step /tmp/K run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 128 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5
step /tmp/K run --variant tiled-coop --batch 3 --heads 5 --head-dim 48 --seq 77 --dtype f16 --reps 5 --no-causal
step /tmp/K run --variant tiled-coop --batch 1 --heads 2 --head-dim 256 --seq 33 --kv-seq 200 --causal top-left --dtype f16 --reps 5
cat $L
