#!/usr/bin/env bash
# Lease of stop 30, fallback when too little device time is left for the suite: the suite's f16
# lines (every variant at N=1024 and 4096, PyTorch beside) and tiled-coop-vk's training step at f16
# beside PyTorch's backward, with main's binary M.   bash .exp/run28.sh $OUT/f16   (timeout_s 300)
set -u
D=${1:?}; mkdir -p $D; o=$D; L=$D/log.txt
source bench/h200_env.sh
gunzip -c .exp/M.gz > /tmp/M; chmod +x /tmp/M
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $* ($SECONDS s)"; "$@"; echo "## exit $?"; }
{
  echo "## nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  step timeout 90 /tmp/M run --variant all $SEED --seq 1024 --dtype f16 --json "$o/attn_f16_N1024.json"
  PYTHONUNBUFFERED=1 step timeout 60 python3 bench/torch_sdpa.py $SEED --seq 1024 --dtype f16 --json "$o/torch_f16_N1024.json"
  step timeout 150 /tmp/M run --variant all $SEED --seq 4096 --dtype f16 --reps 10 --json "$o/attn_f16_N4096.json"
  PYTHONUNBUFFERED=1 step timeout 60 python3 bench/torch_sdpa.py $SEED --seq 4096 --dtype f16 --reps 10 --variants naive-inplace,math,flash,efficient,cudnn --json "$o/torch_f16_N4096.json"
  [ $SECONDS -lt 200 ] && step timeout 40 /tmp/M run --variant tiled-coop-vk --backward $SEED --seq 4096 --dtype f16 --reps 5 --json "$o/attn_bwd_f16_N4096_tiled-coop-vk.json"
  [ $SECONDS -lt 235 ] && PYTHONUNBUFFERED=1 step timeout 45 python3 bench/torch_sdpa.py --backward $SEED --seq 4096 --dtype f16 --reps 5 --variants flash,efficient,cudnn --json "$o/torch_bwd_f16_N4096.json"
} > $L 2>&1
grep -hE "^(## [^e]|unfused|tiled|math|split|attention|naive|flash|efficient|cudnn|bwd_|  [a-z])" $L | grep -v "^## exit 0" | cut -c1-160
