#!/usr/bin/env bash
# Lease 9 (v30): decode with the committed warm-up time floor (edea24b: 3 warm-ups, then more until
# 500 ms have passed, on both sides: attn-wgpu's default and bench/torch_sdpa.py's on CUDA).
# Hq 32, Hkv 8, D 128, N 1, f16, no mask; split-kv and PyTorch flash / efficient / cuDNN.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/W.gz > /tmp/W; chmod +x /tmp/W
step() { echo "## $*" >> $L; timeout ${T:-40} "$@" 2>&1 | grep -E "^(split|flash|efficient|cudnn|Schedule|error|Error)|rror" | cut -c1-150 >> $L; }
/tmp/W run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for b in 1 16; do for m in 4096 16384 65536; do
  S="--batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $m --no-causal --dtype f16 --reps 20"
  step /tmp/W run --variant split-kv $S --json $OUT/attn_B${b}_M${m}.json
  PYTHONUNBUFFERED=1 T=45 step python3 bench/torch_sdpa.py $S --variants flash,efficient,cudnn --json $OUT/torch_B${b}_M${m}.json
done; done
cd $OUT && tar czf json.tar.gz *.json && rm *.json
cat $L
