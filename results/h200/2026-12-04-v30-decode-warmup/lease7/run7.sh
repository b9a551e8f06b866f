#!/usr/bin/env bash
# Lease 7 (v30): the decode cliff against the GPU's clocks: nvidia-smi sampled every 20 ms
# while split-kv runs fast (B4) and slow (B16), and while PyTorch runs B16. Binary D.
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/D.gz > /tmp/D; chmod +x /tmp/D
Q="--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,clocks_throttle_reasons.active,temperature.gpu,temperature.memory --format=csv,noheader"
mon() { nvidia-smi $Q -lms 20 > $OUT/smi_$1.csv 2>&1 & MON=$!; }
D="--heads 32 --head-dim 128 --seq 1 --no-causal --dtype f16 --variant split-kv --kv-heads 8"
/tmp/D run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for b in 4 16; do
  mon B$b; echo "## B$b" >> $L
  timeout 60 /tmp/D run $D --batch $b --kv-seq 16384 --reps 300 2>&1 | grep -E "^split|rror" >> $L
  kill $MON
done
mon torch; echo "## torch B16" >> $L
timeout 90 python3 bench/torch_sdpa.py --batch 16 --heads 32 --kv-heads 8 --head-dim 128 --seq 1 --kv-seq 16384 --no-causal --dtype f16 --reps 300 --variants flash 2>&1 | grep -E "^flash" >> $L
kill $MON
cd $OUT && tar czf smi.tar.gz smi_*.csv && rm smi_*.csv
cat $L
