#!/usr/bin/env bash
# Prepared at the end of stop 27, not run. Issue 12's last open line: `tiled` (no matrix units)
# backward at f16 is slower than unfused-inplace (v32: 5340 vs 4031 µs at N=1024) and than its
# own f32 (3540), with the same f32 arithmetic — the difference is in the input loads:
# tiled_bwd_common.wgsl's row4 reads Q/K/V/dO one element at a time (a switch and a 2-byte load
# each). X = T + X.diff (on 33a39a8+): where D is a multiple of 8 the fused backward reads them as
# 16-byte words and widens once (word4), as the forward's tiled_v2.wgsl does (which made f16
# faster than f32 there). Predicted: f16 and bf16 bwd_kv/bwd_q fall to about f32's times or
# below; f32 unchanged or a little faster. Verified on lavapipe (D 16, 20, 32: PASS; D > 32 needs
# 43 KB of workgroup storage, lavapipe has 32) and by naga for every configuration.
#   bash .exp/run21.sh $OUT/l20     (~3 min)
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt
source bench/h200_env.sh
for b in T X; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --variant tiled --backward"
/tmp/T run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do for b in T X; do for dt in f32 f16 bf16; do
  echo "## $b $dt N1024" >> $L
  timeout 60 /tmp/$b run $SEED --dtype $dt --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|^tiled  |rror|FAIL" | cut -c1-120 >> $L
done; done; done
for b in T X; do echo "## $b f16 N4096" >> $L
  timeout 120 /tmp/$b run $SEED --dtype f16 --seq 4096 --reps 3 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|^tiled  |rror|FAIL" | cut -c1-120 >> $L
done
for b in X; do for args in "--head-dim 48 --kv-heads 4 --seq 300 --kv-seq 500 --causal bottom-right" "--head-dim 64 --key-padding 700 --dropout 0.1 --seq 1000"; do
  echo "## check $b $args" >> $L
  timeout 60 /tmp/$b run --variant tiled --backward --batch 2 --heads 8 --dtype f16 --reps 3 $args 2>&1 | grep -E "^tiled|rror|FAIL" | cut -c1-160 >> $L
done; done
cat $L
