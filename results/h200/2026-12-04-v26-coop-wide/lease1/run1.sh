#!/usr/bin/env bash
# Lease 1 (2026-12-04, session of issue 14/16 work): A = HEAD (tiled-coop and tiled_rt to D 256),
# B = A with tiled-coop's K/V read as matrices straight from device memory (no staging, no
# workgroup barrier), C = A + ATTN_MEMBLOCK_MIB (wgpu memory-block size) for the decode cliff.
set -u
OUT=${1:?}; mkdir -p $OUT; o=$OUT
source bench/h200_env.sh
for x in A B C; do gunzip -c .exp/$x.gz > /tmp/$x; chmod +x /tmp/$x; done
A=/tmp/A; B=/tmp/B; C=/tmp/C
SEED="--batch 8 --heads 16"
step() { echo "## $*"; "$@" 2>&1 | grep -E "^(tiled|split|unfused|math|attention|flash|efficient|cudnn|naive|error|Error)|rror" | cut -c1-150; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
$A run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
echo "### coop A/B D64"
for r in 1 2; do for bin in A B; do for n in 1024 4096; do
  step /tmp/$bin run --variant tiled-coop $SEED --head-dim 64 --seq $n --dtype f16 --reps 20 --json $o/coop_${bin}_D64_N${n}_r$r.json
done; done; done
echo "### coop A/B D128 D256"
for bin in A B; do for d in 128 256; do
  step /tmp/$bin run --variant tiled-coop $SEED --head-dim $d --seq 1024 --dtype f16 --reps 20 --json $o/coop_${bin}_D${d}_N1024.json
done; done
echo "### rt (tiled-subgroup, tiled --tile rt) vs row at wide D"
for dt in f32 f16; do for d in 64 128 256; do
  step $A run --variant tiled-subgroup $SEED --head-dim $d --seq 1024 --dtype $dt --reps 10 --json $o/sub_D${d}_${dt}.json
  step $A run --variant tiled $SEED --head-dim $d --seq 1024 --dtype $dt --reps 10 --json $o/tiled_D${d}_${dt}.json
done
for d in 128 256; do step $A run --variant tiled $SEED --head-dim $d --seq 1024 --dtype $dt --tile row:16 --reps 10 --json $o/tiledrow_D${d}_${dt}.json; done; done
echo "### torch wide D"
for d in 128 256; do PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py $SEED --head-dim $d --seq 1024 --dtype f16 --variants flash,efficient,cudnn --json $o/torch_D${d}.json; done
echo "### decode memblock"
S="--heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 16384 --no-causal --dtype f16 --variant split-kv --reps 20"
step $C run $S --batch 4
ATTN_MEMBLOCK_MIB=64 step $C run $S --batch 4
step $C run $S --batch 8
ATTN_MEMBLOCK_MIB=256 step $C run $S --batch 8
ATTN_MEMBLOCK_MIB=256 step $C run $S --batch 16
echo "### torch bottom-right"
PYTHONUNBUFFERED=1 step python3 bench/torch_sdpa.py --batch 2 --heads 4 --seq 64 --kv-seq 256 --head-dim 64 --causal-align bottom-right --dtype f16 --variants naive,math,flash,efficient,cudnn --json $o/torch_br.json
} > $o/log.txt 2>&1
cat $o/log.txt
