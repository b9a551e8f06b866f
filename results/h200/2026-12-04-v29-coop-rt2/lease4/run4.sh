#!/usr/bin/env bash
# Lease 4 (v29): tiled-coop with two row tiles per subgroup (R.diff: RT = 2 by ATTN_RT=2, BR 128)
# against RT = 1 in the same binary and HEAD's binary (H), then R's checks with RT = 2.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
for x in H R; do gunzip -c .exp/$x.gz > /tmp/$x; chmod +x /tmp/$x; done
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror" | cut -c1-150 >> $L; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $L
/tmp/H run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
SEED="--batch 8 --heads 16 --dtype f16 --variant tiled-coop"
for rep in 1 2; do
  for c in "H 1" "R 1" "R 2"; do set -- $c
    for s in "--head-dim 64 --seq 1024" "--head-dim 128 --seq 1024"; do
      echo "# $1 RT=$2" >> $L; ATTN_RT=$2 step /tmp/$1 run $SEED $s --reps 20; done
  done
done
for c in "H 1" "R 2"; do set -- $c; echo "# $1 RT=$2" >> $L; ATTN_RT=$2 T=90 step /tmp/$1 run $SEED --head-dim 64 --seq 4096 --reps 10; done
export ATTN_RT=2
step /tmp/R run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
step /tmp/R run --variant tiled-coop --batch 8 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
step /tmp/R run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
step /tmp/R run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 128 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5
step /tmp/R run --variant tiled-coop --batch 3 --heads 5 --head-dim 48 --seq 77 --dtype f16 --reps 5 --no-causal
step /tmp/R run --variant tiled-coop --batch 1 --heads 2 --head-dim 32 --seq 33 --kv-seq 200 --causal top-left --dtype f16 --reps 5
step /tmp/R run --variant tiled-coop --batch 2 --heads 4 --head-dim 16 --seq 300 --dtype f16 --reps 5 --no-causal --key-padding 250,17
cat $L
