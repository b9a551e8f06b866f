#!/usr/bin/env bash
# Lease 8 (v30): split-kv's slow phase is a warm-up: per-forward GPU times from --trace over
# 300 forwards, and every decode shape after a long warm-up, with PyTorch warmed the same way.
# Binary D (its experiment switches unset: the kernel and host of 291767b).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/D.gz > /tmp/D; chmod +x /tmp/D
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(split|flash|efficient|cudnn|error|Error)|rror" | cut -c1-150 >> $L; }
/tmp/D run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --kv-heads 8"
step /tmp/D run $D --variant split-kv --batch 16 --kv-seq 16384 --warmup 3 --reps 300 --trace $OUT/trace_B16_M16384.json
step /tmp/D run $D --variant split-kv --batch 16 --kv-seq 65536 --warmup 3 --reps 60 --trace $OUT/trace_B16_M65536.json
for s in "1 4096" "1 16384" "1 65536" "16 4096" "16 16384" "16 65536" "8 16384"; do set -- $s
  step /tmp/D run $D --variant split-kv --batch $1 --kv-seq $2 --warmup 200 --reps 50
done
for s in "16 16384" "16 65536"; do set -- $s
  T=120 step python3 bench/torch_sdpa.py $D --batch $1 --kv-seq $2 --warmup 200 --reps 50 --variants flash,efficient,cudnn
done
cd $OUT && tar czf traces.tar.gz trace_*.json && rm trace_*.json
cat $L
