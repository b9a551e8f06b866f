#!/usr/bin/env bash
# Decode A/B in one lease: split-kv v1 (s1: a workgroup per query head, 2-byte loads) against v2
# (s2: a workgroup per K/V head's group, 16-byte K loads); tiled (one workgroup per block of query
# rows) and PyTorch flash / cuDNN beside.
set -u
out=$1
source bench/h200_env.sh
mkdir -p $out
.exp/s2 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for b in 1 16; do
  for m in 4096 16384 65536; do
    S="--batch $b --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq $m --no-causal --dtype f16"
    for bin in s1 s2; do
      echo "## $bin split-kv B=$b M=$m"
      .exp/$bin run --variant split-kv $S --reps 20 --json $out/${bin}_B${b}_M${m}.json | grep -E "^split"
    done
    if [ $m = 65536 ]; then
      echo "## s2 all B=$b M=$m"
      .exp/s2 run --variant all $S --reps 5 --json $out/all_B${b}_M${m}.json | grep -E "^(unfused|math|tiled|split)"
      python3 bench/torch_sdpa.py $S --reps 20 --variants flash,cudnn,naive,math --json $out/torch_B${b}_M${m}.json | grep -E "^(flash|cudnn|naive|math)"
    fi
  done
done
