#!/usr/bin/env bash
# Prepared in stop 28 (no device was lent that session), not run. First light of `tiled-coop-vk`:
# shaders/tiled_coop_vk.comp (GLSL, GL_KHR_cooperative_matrix, compiled by build.rs) through
# PASSTHROUGH_SHADERS, the softmax in registers under NVIDIA's mma.m16n8k16 element layout, which
# the device's probe (shaders/coop_layout_probe.comp) must confirm first. It runs T = a build of
# main with it (cargo build --release; gzip -c target/release/attn-wgpu > .exp/T.gz), as /tmp/K.
# Prediction (FLOP/byte model and v29's ablation of tiled-coop at N=1024, 270 µs): the S round
# trip, the softmax reads, the P stores and the rescale round trips go (about 38.5 + 13.3 µs and
# part of the 91 µs skeleton), staging stays: 150-200 µs at N=1024 (flash 95), if the driver keeps
# the 4 + 4 + 4 + 4 matrices in registers.
# Stop 29 added R = T with ROWS = 2 (R2.diff: two 16-row tiles a subgroup, BR = 128, each K/V
# matrix load serving both, as FlashAttention-2's forward; twice the accumulators, so the
# question is whether the driver keeps ~180 registers without spilling). Both ROWS builds pass
# against f64 on emulated cooperative matrices (tests/coop_vk.rs); prediction: 10-25 % faster
# than ROWS = 1 if it does not spill (half the K/V matrix loads from shared memory per FLOP).
# Stop 29 also added U = T with the device modules through spirv-opt (U.diff: build.rs runs
# SPIRV-Tools 2025.5's optimizer, loops unrolled and arrays of matrices scalarized): glslang
# leaves the [[unroll]] loops as loops with an Unroll hint and the matrix arrays dynamically
# indexed; WGSL tiled-coop was 44 % slower with arrays of matrices. If the driver unrolls and
# promotes them itself U = T; if not, U is the faster one and main needs the unrolling.
#   bash results/h200/2026-12-04-v35-coop-vk/prepared/run22.sh $OUT/vk    (~6 min: timeout_s 500)
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/vk.txt; C=$OUT/checks.txt
source bench/h200_env.sh
gunzip -c .exp/T.gz > /tmp/K; chmod +x /tmp/K
gunzip -c .exp/R2.gz > /tmp/R; chmod +x /tmp/R
gunzip -c .exp/U.gz > /tmp/U; chmod +x /tmp/U
# 1. What the probe saw (adapter.caps.coop_layout), and the plan's verdict on a small problem.
#    (`--variant all`: a refused single variant writes no JSON; all writes one with its reason.)
timeout 90 /tmp/K run --variant all --batch 1 --heads 4 --seq 128 --head-dim 64 \
  --dtype f16 --reps 3 --verbose --json $OUT/small.json > $OUT/small.txt 2>&1
python3 -c "import json,sys; print('coop_layout:', json.load(open(sys.argv[1]))['adapter']['caps']['coop_layout'])" $OUT/small.json >> $L 2>&1
grep -E "^tiled|rror|incompatible" $OUT/small.txt | cut -c1-200 >> $L
# 2. Checks against the f64 reference: causal / not, ragged N, GQA with N != M both alignments,
#    decode-like N, training (dQ, dK, dV through tiled-coop's backward).
step() { echo "## $*" >> $C; timeout 40 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror|FAIL|  d[QKV]" | cut -c1-160 >> $C; }
V="--variant tiled-coop-vk --dtype f16 --head-dim 64"
step /tmp/K run $V --batch 8 --heads 16 --seq 1024 --reps 5
step /tmp/K run $V --batch 3 --heads 5 --seq 77 --reps 5 --no-causal
step /tmp/K run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 5
step /tmp/K run $V --batch 1 --heads 2 --seq 33 --kv-seq 200 --causal top-left --reps 5
step /tmp/K run $V --batch 2 --heads 8 --seq 900 --kv-seq 300 --causal bottom-right --reps 5
step /tmp/K run $V --batch 1 --heads 4 --seq 1 --kv-seq 77 --reps 5 --no-causal
step /tmp/K run $V --batch 2 --heads 4 --seq 128 --reps 3 --backward
step /tmp/K run $V --batch 8 --heads 16 --seq 1024 --reps 3 --backward
# (stop 29) key padding and dropout, forward and training.
step /tmp/K run $V --batch 2 --heads 8 --seq 300 --key-padding 300,117 --reps 3
step /tmp/K run $V --batch 2 --heads 8 --seq 300 --key-padding 0,117 --dropout 0.2 --reps 3 --backward
echo "## U (spirv-opt)" >> $C
step /tmp/U run $V --batch 8 --heads 16 --seq 1024 --reps 5
step /tmp/U run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 5
echo "## R (ROWS = 2)" >> $C
step /tmp/R run $V --batch 8 --heads 16 --seq 1024 --reps 5
step /tmp/R run $V --batch 3 --heads 5 --seq 77 --reps 5 --no-causal
step /tmp/R run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 5
step /tmp/R run $V --batch 2 --heads 8 --seq 900 --kv-seq 300 --causal bottom-right --reps 5
step /tmp/R run $V --batch 2 --heads 4 --seq 128 --reps 3 --backward
# 3. A/B in one lease, two rounds, beside PyTorch (flash, cuDNN, efficient). (`run --variant` takes
#    one name, or all.)
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16"
/tmp/K run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do
  echo "## round $r N1024 / N4096" >> $L
  for bv in K:tiled-coop K:tiled-coop-vk U:tiled-coop-vk R:tiled-coop-vk; do
    b=/tmp/${bv%%:*}; v=${bv#*:}; echo "# binary $b" >> $L
    timeout 40 $b run $SEED --variant $v --seq 1024 --reps 20 2>&1 | grep -E "^tiled|rror" | cut -c1-120 >> $L
    timeout 60 $b run $SEED --variant $v --seq 4096 --reps 10 2>&1 | grep -E "^tiled|rror" | cut -c1-120 >> $L
  done
done
timeout 90 python3 bench/torch_sdpa.py $SEED --seq 1024 --reps 20 --variants flash,efficient,cudnn --json $OUT/torch_N1024.json 2>&1 | tail -5 | cut -c1-160 >> $L
timeout 90 python3 bench/torch_sdpa.py $SEED --seq 4096 --reps 10 --variants flash,efficient,cudnn --json $OUT/torch_N4096.json 2>&1 | tail -5 | cut -c1-160 >> $L
cat $L; grep -c PASS $C; grep -E "FAIL|rror" $C | head
