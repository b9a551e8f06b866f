#!/usr/bin/env bash
# Lease 1 (v29): where tiled-coop's time goes (ablations by the experiment-only override ABL, A.diff)
# and what the decode cliff depends on (split-kv, knobs by --override; HEAD's kernel).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/A.gz > /tmp/A; chmod +x /tmp/A
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(tiled|split|flash|efficient|cudnn|error|Error)|rror" | cut -c1-150 >> $L; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $L
/tmp/A run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop"
for a in 0 1 2 4 8 16 18 26 31 0; do step /tmp/A run $SEED --seq 1024 --reps 20 --override ABL=$a; done
for a in 0 1 2 8; do T=90 step /tmp/A run $SEED --seq 4096 --reps 10 --override ABL=$a; done
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --reps 20 --variant split-kv"
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 16384
step /tmp/A run $D --batch 64 --kv-heads 8 --kv-seq 4096
step /tmp/A run $D --batch 16 --kv-heads 32 --kv-seq 16384
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 16384 --override SPLITS=64
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 16384 --override UNROLL=4
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 16384 --override KW=8 --override WPL=2 --override UNROLL=8
step /tmp/A run $D --batch 8 --kv-heads 8 --kv-seq 16384
step /tmp/A run $D --batch 4 --kv-heads 8 --kv-seq 16384
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 4096
step /tmp/A run $D --batch 16 --kv-heads 8 --kv-seq 16384 --head-dim 64
T=120 step python3 bench/torch_sdpa.py --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 4096 --no-causal --dtype f16 --reps 20 --variants flash,efficient,cudnn
T=120 step python3 bench/torch_sdpa.py --batch 16 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 16384 --no-causal --dtype f16 --reps 20 --variants flash,cudnn
cat $L
