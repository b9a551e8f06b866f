#!/usr/bin/env bash
# Lease of stop 30, call 4 (what device time is left after the suite): the training step at f16,
# bench/h200_backward.sh's f16 lines with main's binary M (tiled-coop-vk's GLSL backward), PyTorch's
# backward in the same call, then X (tiled's f16 backward with 16-byte loads) vs M if time is left.
#   bash .exp/run27.sh $OUT/bwd    (timeout_s 420)
set -u
D=${1:?}; mkdir -p $D; o=$D; L=$D/log.txt
source bench/h200_env.sh
for b in M X; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64"
step() { echo "## $* ($SECONDS s)"; "$@"; echo "## exit $?"; }
{
  step /tmp/M run --variant all --backward $SEED --seq 1024 --dtype f16 --reps 10 --json "$o/attn_bwd_f16_N1024.json"
  for v in tiled-coop-vk tiled-coop; do
    step /tmp/M run --variant $v --backward $SEED --seq 4096 --dtype f16 --reps 5 --json "$o/attn_bwd_f16_N4096_$v.json"
  done
  PYTHONUNBUFFERED=1 step timeout 60 python3 bench/torch_sdpa.py --backward $SEED --seq 1024 --dtype f16 --reps 10 --json "$o/torch_bwd_f16_N1024.json"
  PYTHONUNBUFFERED=1 step timeout 90 python3 bench/torch_sdpa.py --backward $SEED --seq 4096 --dtype f16 --reps 5 --variants naive-inplace,flash,efficient,cudnn --json "$o/torch_bwd_f16_N4096.json"
  for b in M X; do
    [ $SECONDS -gt 330 ] && break
    echo "## X/M $b"
    timeout 40 /tmp/$b run $SEED --variant tiled --backward --dtype f16 --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|^tiled  |rror|FAIL" | cut -c1-120
  done
} > $L 2>&1
grep -hE "^(## [^e]|unfused|tiled|math|split|attention|naive|flash|efficient|cudnn|bwd_|  [a-z])" $L | grep -v "^## exit 0" | cut -c1-160
