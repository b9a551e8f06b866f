#!/usr/bin/env bash
# v29 checks of the committed tiled-coop (two row tiles for D <= 64): dropout, strict tolerance
# with LO=2, key padding, GQA N != M bottom-right, small D, top-left N != M.
set -u
B=$1; L=$2
source bench/h200_env.sh
step() { echo "## $*" >> $L; timeout 20 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror" | cut -c1-150 >> $L; }
step $B run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
step $B run --variant tiled-coop --batch 8 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
step $B run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 64 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5 --key-padding 800,317
step $B run --variant tiled-coop --batch 3 --heads 5 --head-dim 48 --seq 77 --dtype f16 --reps 5 --no-causal
step $B run --variant tiled-coop --batch 1 --heads 2 --head-dim 32 --seq 33 --kv-seq 200 --causal top-left --dtype f16 --reps 5
step $B run --variant tiled-coop --batch 2 --heads 4 --head-dim 16 --seq 300 --dtype f16 --reps 5 --no-causal --key-padding 250,17
step $B run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
