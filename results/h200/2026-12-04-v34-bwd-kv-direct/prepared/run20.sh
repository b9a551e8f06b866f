#!/usr/bin/env bash
# Prepared at the end of stop 27, not run. Issue 16 §3's second lever, never measured: vector-typed
# workgroup arrays for the matrix operands. V = T + V.diff (T = main at 33a39a8 or later: rebuild
# and gzip to .exp/T.gz): every cooperative-matrix kernel's ks / vs become array<vec4<f16>> (row
# pitch KP4 = D/4 + 2 vectors, coopLoad strides in vectors, as llama.cpp's cm1 does with f16vec4),
# so staging writes two 8-byte words per 16-byte element instead of eight 2-byte halves. naga 30
# validates and translates it (tests/translate.rs passes with V.diff applied); whether NVIDIA's
# driver reads the stride in vectors is what the checks below find out first.
# And Y = T + Y.diff: tiled_coop_rt2.wgsl with one f32 score tile a subgroup (tile 2's scores wait
# in registers until tile 1's are read; rescale and output one accumulator at a time): workgroup
# storage 20992 -> 16896 bytes, the change that took the backward's passes 4-8 % faster (v34).
# And F2 = T + F2.diff: v34's failed F (the forward without its unused `sl` array at LO = 0, NaNs)
# with `sl` at 8 halves (16 bytes) instead of 1: if F's NaNs came from sf landing off a 16-byte
# boundary behind a 2-byte array, F2 passes (20992 -> 16912 bytes at D = 64).
#   bash .exp/run20.sh $OUT/l19      (~6 min: timeout_s 590)
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt; C=$OUT/checks.txt
source bench/h200_env.sh
for b in T V Y F2; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
step() { echo "## $*" >> $C; timeout 30 "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror|FAIL|  d[QKV]" | cut -c1-160 >> $C; }
step /tmp/V run --variant tiled-coop --batch 2 --heads 4 --seq 128 --head-dim 64 --dtype f16 --reps 3 --backward
bash .exp/checks.sh /tmp/V $C
bash .exp/checks.sh /tmp/Y $C
bash .exp/checks.sh /tmp/F2 $C
SEED="--batch 8 --heads 16 --dtype f16 --variant tiled-coop"
/tmp/T run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for r in 1 2; do for b in T V Y F2; do
  echo "## fwd $b N1024 / N4096 / D128" >> $L
  timeout 30 /tmp/$b run $SEED --head-dim 64 --seq 1024 --reps 20 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
  timeout 40 /tmp/$b run $SEED --head-dim 64 --seq 4096 --reps 10 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
  timeout 30 /tmp/$b run $SEED --head-dim 128 --seq 1024 --reps 10 2>&1 | grep -E "^tiled-coop|rror" | cut -c1-100 >> $L
  echo "## bwd $b N1024 / N4096" >> $L
  timeout 40 /tmp/$b run $SEED --head-dim 64 --backward --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
  timeout 60 /tmp/$b run $SEED --head-dim 64 --backward --seq 4096 --reps 3 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
done; done
cat $L; grep -c PASS $C; grep -E "FAIL|rror" $C | head
