#!/usr/bin/env bash
# Stop 31, call 1 (one call, timeout_s 600): issue 12's open lines.
#  1. A/B of the tiled backward's input loads: M0 = cc728e3 (one 2-byte/4-byte element a load),
#     M = main f4a3ca7 (X: 16-byte words where D % 8 == 0). B8 H16 D64 causal, f16/bf16/f32 N1024,
#     f16 N4096, plus X's correctness on odd shapes (GQA, bottom-right, key padding + dropout).
#  2. bench/h200_backward.sh with the winner: M if every M run PASSes and its f16 N1024 backward is
#     not slower than M0's, else M0. Guarded so the call ends before 600 s (PyTorch runs first).
#   bash .exp/run29.sh $OUT/c1
set -u
D=${1:?}; mkdir -p $D; L=$D/ab.txt
source bench/h200_env.sh
for b in M M0; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --variant tiled --backward"
ab() { echo "## $1 $2 N$3 ($SECONDS s)"; timeout 90 /tmp/$1 run $SEED --dtype $2 --seq $3 --reps $4 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|^tiled  |rror|FAIL|panic" | cut -c1-170; }
{
  /tmp/M0 run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
  for dt in f16 bf16 f32; do for b in M0 M; do ab $b $dt 1024 10; done; done
  for b in M0 M; do ab $b f16 4096 3; done
  for args in "--head-dim 48 --kv-heads 4 --seq 300 --kv-seq 500 --causal bottom-right" "--head-dim 64 --key-padding 700 --dropout 0.1 --seq 1000" "--head-dim 40 --seq 257"; do
    echo "## check M $args ($SECONDS s)"
    timeout 60 /tmp/M run --variant tiled --backward --batch 2 --heads 8 --dtype f16 --reps 3 $args 2>&1 | grep -E "^tiled|rror|FAIL|panic" | cut -c1-170
  done
} > $L 2>&1
cat $L
t() { awk -v b="$1" '/^## /{cur=($2==b && $3=="f16" && $4=="N1024")} cur && $1=="tiled" && $2=="1+3"{print $4}' $L; }
tM=$(t M); tM0=$(t M0)
pick=M0
if [ -n "$tM" ] && [ -n "$tM0" ] && ! grep -qE "FAIL|rror|panic" $L && awk -v a="$tM" -v b="$tM0" 'BEGIN{exit !(a<=b)}'; then pick=M; fi
echo "## f16 N1024 backward: M $tM, M0 $tM0 -> bench with $pick ($SECONDS s)" | tee -a $L
mkdir -p /tmp/st; export TMPDIR=/tmp/st
timeout $((585 - SECONDS)) bash bench/h200_backward.sh /tmp/$pick $D/bwd
echo "backward exit $? at $SECONDS s"
if [ ! -f $D/bwd/backward.tar.gz ]; then mkdir -p $D/bwd; o=$(ls -d /tmp/st/tmp.* | head -1); cp $o/log.txt $D/bwd/log.txt; tar czf $D/bwd/backward.tar.gz -C $o .; echo "packed after timeout"; fi
