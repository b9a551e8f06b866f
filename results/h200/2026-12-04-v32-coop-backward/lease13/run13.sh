#!/usr/bin/env bash
# Lease 13: (1) tiled-coop backward, H (commit d3aa681) against I (= H + I.diff: bwd_kv keeps the
# 64 keys' K and V in workgroup memory and re-reads their matrices each block instead of holding
# them in registers; Q and dO staged in arrays of their own), with PyTorch flash / cuDNN backward
# at N=4096; (2) bench/h200_decode.sh with H. bash .exp/run13.sh $OUT/l13
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt
source bench/h200_env.sh
for b in H I; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16"
/tmp/H run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do for b in H I; do
  echo "## $b N4096" >> $L
  timeout 90 /tmp/$b run --variant tiled-coop --backward $SEED --seq 4096 --reps 5 --verbose 2>&1 | grep -E "^tiled-coop|^bwd_|rror" | cut -c1-160 >> $L
done; done
for b in H I; do
  echo "## $b N1024" >> $L
  timeout 60 /tmp/$b run --variant tiled-coop --backward $SEED --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^tiled-coop|^bwd_|rror" | cut -c1-160 >> $L
done
echo "## I checks" >> $L
for a in "--batch 2 --heads 8 --kv-heads 2 --seq 96 --kv-seq 160 --causal bottom-right --head-dim 64 --dropout 0.1" "--batch 2 --heads 4 --seq 70 --head-dim 32 --key-padding 50,70"; do
  timeout 60 /tmp/I run --variant tiled-coop --backward --dtype f16 --reps 3 --warmup-ms 0 $a 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-200 >> $L
done
PYTHONUNBUFFERED=1 timeout 90 python3 bench/torch_sdpa.py --backward $SEED --seq 4096 --reps 5 --variants flash,cudnn 2>&1 | grep -E "^  (flash|cudnn)" >> $L
timeout 330 bash bench/h200_decode.sh /tmp/H $OUT/decode > /dev/null 2>&1
cat $L; tail -30 $OUT/decode/log.txt | cut -c1-200
