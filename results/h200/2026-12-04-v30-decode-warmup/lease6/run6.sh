#!/usr/bin/env bash
# Lease 6 (v30): the decode cliff, placement of the data: K and V re-copied on the GPU into fresh
# buffers after the upload (ATTN_RECOPY=1), or never uploaded (ATTN_NOUPLOAD=1: zeros, FAIL by
# design). Binary D (D.diff on 291767b).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/D.gz > /tmp/D; chmod +x /tmp/D
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(split|error|Error)|rror" | cut -c1-150 >> $L; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv >> $L
/tmp/D run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --reps 20 --variant split-kv --kv-heads 8"
for b in 16 8; do
  echo "# base" >> $L; step /tmp/D run $D --batch $b --kv-seq 16384
  echo "# ATTN_RECOPY=1" >> $L; ATTN_RECOPY=1 step /tmp/D run $D --batch $b --kv-seq 16384
  echo "# ATTN_NOUPLOAD=1" >> $L; ATTN_NOUPLOAD=1 step /tmp/D run $D --batch $b --kv-seq 16384
done
echo "# ATTN_RECOPY=1" >> $L; ATTN_RECOPY=1 step /tmp/D run $D --batch 16 --kv-seq 65536
echo "# ATTN_NOUPLOAD=1" >> $L; ATTN_NOUPLOAD=1 step /tmp/D run $D --batch 16 --kv-seq 65536
echo "# base" >> $L; step /tmp/D run $D --batch 16 --kv-seq 16384
echo "# base B4" >> $L; step /tmp/D run $D --batch 4 --kv-seq 16384
cat $L
