#!/usr/bin/env bash
# Lease of stop 30, call 2: tiled-coop-vk with the accumulator layout lease 19's probe saw (main
# 9e4a47a). Two hypotheses for the A operand's order: Ka = A as the accumulator (A_OF = i, main),
# Kb = A in mma.m16n8k16's A-fragment order (Ab.diff). Each binary's probe checks its own; the one
# accepted runs. Both carry E.diff: EXP_ROWS (1|2), EXP_GLSL_BWD (the GLSL backward). Ua = Ka +
# U.diff (spirv-opt on the device modules).   bash .exp/run25.sh $OUT   (timeout_s 590)
set -u
OUT=${1:?}; mkdir -p $OUT; P=$OUT/probe.txt; C=$OUT/checks.txt; L=$OUT/ab.txt; W=$OUT/bwd.txt
source bench/h200_env.sh
for b in Ka Kb Ua; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
K=
for b in Ka Kb; do
  echo "## $b" >> $P
  timeout 60 /tmp/$b run --variant tiled-coop-vk --batch 1 --heads 4 --seq 128 --head-dim 64 --dtype f16 --reps 3 --json $OUT/small_$b.json > /tmp/small_$b.txt 2>&1
  grep -E "^tiled|rror|incompatible" /tmp/small_$b.txt | cut -c1-700 >> $P
  if grep -q "PASS" /tmp/small_$b.txt && [ -z "$K" ]; then K=/tmp/$b; fi
done
echo "accepted: ${K:-none}" >> $P; cat $P
[ -z "$K" ] && exit 0
U=/tmp/Ua; [ "$K" != /tmp/Ka ] && U=
step() { echo "## $*" >> $C; timeout 60 env "$@" 2>&1 | grep -E "^(tiled|error|Error)|rror|FAIL|  d[QKV]" | cut -c1-160 >> $C; }
V="--variant tiled-coop-vk --dtype f16 --head-dim 64"
step $K run $V --batch 8 --heads 16 --seq 1024 --reps 5
step $K run $V --batch 3 --heads 5 --seq 77 --reps 5 --no-causal
step $K run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 5
step EXP_ROWS=2 $K run $V --batch 8 --heads 16 --seq 1024 --reps 5
step EXP_GLSL_BWD=1 $K run $V --batch 2 --heads 16 --kv-heads 4 --seq 700 --kv-seq 900 --causal bottom-right --reps 3 --backward
# A/B round 1 (forward, B8 H16 D64 causal f16).
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16"
ab() { echo "# $*" >> $L; timeout 60 env "$@" 2>&1 | grep -E "^tiled|rror" | cut -c1-120 >> $L; }
round() {
  echo "## round $1 ($SECONDS s)" >> $L
  for N in 1024 4096; do
    R=20; [ $N = 4096 ] && R=10
    ab $K run $SEED --variant tiled-coop --seq $N --reps $R
    ab $K run $SEED --variant tiled-coop-vk --seq $N --reps $R
    ab EXP_ROWS=2 $K run $SEED --variant tiled-coop-vk --seq $N --reps $R
    [ -n "$U" ] && ab $U run $SEED --variant tiled-coop-vk --seq $N --reps $R
  done
}
round 1
# The backward: WGSL (tiled-coop's) vs GLSL, per dispatch.
for N in 1024 4096; do
  for e in X=0 EXP_GLSL_BWD=1; do
    [ $SECONDS -gt 420 ] && break
    echo "## N$N $e ($SECONDS s)" >> $W
    timeout 90 env $e $K run $SEED --backward --verbose --variant tiled-coop-vk --seq $N --reps 5 2>&1 \
      | grep -E "^(bwd_|attention)|^tiled-coop-vk  |rror|PASS|FAIL" | cut -c1-160 >> $W
  done
done
[ $SECONDS -lt 400 ] && step $K run $V --batch 2 --heads 8 --seq 300 --key-padding 0,117 --dropout 0.2 --reps 3 --backward
[ $SECONDS -lt 410 ] && step EXP_GLSL_BWD=1 $K run $V --batch 2 --heads 8 --seq 300 --key-padding 0,117 --dropout 0.2 --reps 3 --backward
[ $SECONDS -lt 420 ] && step EXP_ROWS=2 $K run $V --batch 2 --heads 8 --seq 900 --kv-seq 300 --causal bottom-right --reps 5
[ $SECONDS -lt 440 ] && round 2
[ $SECONDS -lt 500 ] && timeout 45 python3 bench/torch_sdpa.py $SEED --seq 1024 --reps 20 --variants flash,cudnn --json $OUT/torch_N1024.json 2>&1 | tail -3 | cut -c1-160 >> $L
[ $SECONDS -lt 530 ] && timeout 45 python3 bench/torch_sdpa.py $SEED --seq 4096 --reps 10 --variants flash,cudnn --json $OUT/torch_N4096.json 2>&1 | tail -3 | cut -c1-160 >> $L
echo "end $SECONDS s" >> $L
cat $L; echo; cat $W; echo; grep -c PASS $C; grep -E "FAIL|rror" $C | head
