#!/usr/bin/env bash
# Prepared in stop 29 (no device lent), not run. tiled-coop-vk's own backward
# (shaders/tiled_coop_vk_bwd.comp: FlashAttention-2's bwd_kv and bwd_q with P and dS made element
# for element in registers, 64-row / 64-key blocks) against the WGSL backward the variant uses
# today (tiled-coop's: P and dS through workgroup memory; v34: bwd_kv 5018 µs, bwd_q 3464 µs at
# B8 H16 N4096 D64 causal f16). T = main (WGSL backward), G = T with GLSL_BACKWARD = true
# (G.diff). Both pass dQ, dK, dV against f64 on emulated cooperative matrices (tests/coop_vk.rs).
# Prediction: the WGSL passes spend most of their time on the S/P/dS round trips and the
# occupancy their workgroup bytes cost (v34's ablation: storage alone 1.72x); without them,
# bwd_kv + bwd_q ≈ 3000-4500 µs at N=4096 (flash's whole backward 3115), if the ~120 registers
# of bwd_kv do not spill. Run after run22.sh (the layout probe must accept the device first).
#   bash results/h200/2026-12-04-v35-coop-vk/prepared/run23.sh $OUT/bwdvk   (~4 min: timeout_s 400)
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/bwdvk.txt; C=$OUT/checks.txt
source bench/h200_env.sh
gunzip -c .exp/T.gz > /tmp/T; chmod +x /tmp/T
gunzip -c .exp/G.gz > /tmp/G; chmod +x /tmp/G
# 1. Checks of G's gradients against the f64 backward.
step() { echo "## $*" >> $C; timeout 60 "$@" 2>&1 | grep -E "^tiled|rror|FAIL|PASS" | cut -c1-200 >> $C; }
V="--variant tiled-coop-vk --dtype f16 --head-dim 64 --backward"
step /tmp/G run $V --batch 8 --heads 16 --seq 1024 --reps 3
step /tmp/G run $V --batch 3 --heads 5 --seq 77 --reps 3 --no-causal
step /tmp/G run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 3
step /tmp/G run $V --batch 2 --heads 8 --seq 900 --kv-seq 300 --causal bottom-right --reps 3
step /tmp/G run $V --batch 1 --heads 4 --seq 1 --kv-seq 77 --reps 3 --no-causal
step /tmp/G run $V --batch 2 --heads 8 --seq 300 --key-padding 0,117 --dropout 0.2 --reps 3
# 2. A/B, two rounds: per-dispatch backward times (bwd_dot, bwd_kv, bwd_q) and the step.
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --backward --verbose"
for r in 1 2; do
  for N in 1024 4096; do
    for b in T G; do
      echo "## round $r N$N binary $b" >> $L
      timeout 90 /tmp/$b run $SEED --variant tiled-coop-vk --seq $N --reps 5 2>&1 \
        | grep -E "^(bwd_|attention)|^tiled-coop-vk  |rror" | cut -c1-160 >> $L
    done
  done
done
cat $L; grep -c PASS $C; grep -E "FAIL|rror" $C | head
