#!/usr/bin/env bash
# Lease 3 (v29): the decode cliff: K/V heads in dispatches of at most ATTN_KV_CHUNK_MIB MiB of K,
# each filled with ATTN_SPLITS slices per head, binding ranges of the one K/V buffer (default) or
# separate buffers per chunk (ATTN_KV_BUFS=1). Binary C (C.diff).
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/C.gz > /tmp/C; chmod +x /tmp/C
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(tiled|split|flash|efficient|cudnn|error|Error)|rror" | cut -c1-150 >> $L; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $L
/tmp/C run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --reps 20 --variant split-kv --kv-heads 8"
e() { echo "# $*" >> $L; }
e base; step /tmp/C run $D --batch 16 --kv-seq 16384
for c in "128 32" "64 64" "256 16"; do set -- $c
  e ranges chunk $1 splits $2; ATTN_KV_CHUNK_MIB=$1 ATTN_SPLITS=$2 step /tmp/C run $D --batch 16 --kv-seq 16384
  e bufs chunk $1 splits $2; ATTN_KV_BUFS=1 ATTN_KV_CHUNK_MIB=$1 ATTN_SPLITS=$2 step /tmp/C run $D --batch 16 --kv-seq 16384
done
e bufs chunk 128 splits 8; ATTN_KV_BUFS=1 ATTN_KV_CHUNK_MIB=128 ATTN_SPLITS=8 step /tmp/C run $D --batch 16 --kv-seq 16384
e base B8; step /tmp/C run $D --batch 8 --kv-seq 16384
e bufs B8 chunk 128 splits 32; ATTN_KV_BUFS=1 ATTN_KV_CHUNK_MIB=128 ATTN_SPLITS=32 step /tmp/C run $D --batch 8 --kv-seq 16384
e ranges M65536 chunk 128 splits 128; ATTN_KV_CHUNK_MIB=128 ATTN_SPLITS=128 step /tmp/C run $D --batch 16 --kv-seq 65536
e bufs M65536 chunk 128 splits 128; ATTN_KV_BUFS=1 ATTN_KV_CHUNK_MIB=128 ATTN_SPLITS=128 step /tmp/C run $D --batch 16 --kv-seq 65536
cat $L
