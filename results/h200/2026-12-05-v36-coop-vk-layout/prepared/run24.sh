#!/usr/bin/env bash
# Lease of stop 30, call 1: run22 (tiled-coop-vk first light) under a 440 s guard, then as much of
# run23 (G = the GLSL backward) as fits: G's gradient checks at two shapes and one A/B round of
# T vs G at N=1024 and 4096.   bash .exp/run24.sh $OUT   (timeout_s 590)
set -u
OUT=${1:?}; mkdir -p $OUT/vk $OUT/bwdvk
timeout 440 bash results/h200/2026-12-04-v35-coop-vk/prepared/run22.sh $OUT/vk > $OUT/vk/stdout.txt 2>&1
echo "run22 done at $SECONDS s"
source bench/h200_env.sh
gunzip -c .exp/T.gz > /tmp/T; chmod +x /tmp/T
gunzip -c .exp/G.gz > /tmp/G; chmod +x /tmp/G
L=$OUT/bwdvk/bwdvk.txt
V="--variant tiled-coop-vk --dtype f16 --head-dim 64 --backward"
for a in "--batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right" "--batch 2 --heads 8 --seq 300 --key-padding 0,117 --dropout 0.2"; do
  [ $SECONDS -gt 500 ] && break
  echo "## G check $a" >> $L
  timeout 40 /tmp/G run $V $a --reps 3 2>&1 | grep -E "^tiled|rror|FAIL|PASS|  d[QKV]" | cut -c1-200 >> $L
done
for N in 4096 1024; do
  for b in T G; do
    [ $SECONDS -gt 540 ] && break
    echo "## N$N binary $b" >> $L
    timeout 45 /tmp/$b run --batch 8 --heads 16 --head-dim 64 --dtype f16 --backward --verbose --variant tiled-coop-vk --seq $N --reps 5 2>&1 \
      | grep -E "^(bwd_|attention)|^tiled-coop-vk  |rror" | cut -c1-160 >> $L
  done
done
echo "end at $SECONDS s"
cat $OUT/vk/vk.txt 2>/dev/null | head -60; grep -c PASS $OUT/vk/checks.txt; grep -E "FAIL|rror" $OUT/vk/checks.txt | head; cat $L
