#!/usr/bin/env bash
# Lease 11: tiled-coop's backward on cooperative matrices (first run on hardware): checks, then
# the seed's shape against tiled / unfused-inplace and PyTorch's backward; the forward unchanged.
# Binary: .exp/G.gz (cargo build --release of the working tree). bash .exp/run11.sh $OUT/l11
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/log.txt
source bench/h200_env.sh
gunzip -c .exp/G.gz > /tmp/G; chmod +x /tmp/G
step() { echo "## $*" >> $L; timeout ${T:-60} "$@" 2>&1 | grep -E "^(split|tiled|unfused|flash|efficient|cudnn|math|error|Error)|rror|FAIL|  d[QKV]|backward|Backward" | cut -c1-220 >> $L; }
C="--variant tiled-coop --backward --dtype f16 --reps 3 --warmup-ms 0"
step /tmp/G run $C --batch 2 --heads 4 --seq 128 --head-dim 64
step /tmp/G run $C --batch 2 --heads 4 --seq 100 --head-dim 32 --no-causal
step /tmp/G run $C --batch 1 --heads 2 --seq 200 --head-dim 16 --key-padding 150
step /tmp/G run $C --batch 2 --heads 8 --kv-heads 2 --seq 96 --kv-seq 160 --causal bottom-right --head-dim 64
step /tmp/G run $C --batch 2 --heads 8 --kv-heads 2 --seq 160 --kv-seq 96 --causal top-left --head-dim 48
step /tmp/G run $C --batch 2 --heads 4 --seq 128 --head-dim 64 --dropout 0.1
step /tmp/G run $C --batch 2 --heads 4 --seq 70 --head-dim 64 --key-padding 50,70 --dropout 0.2
step /tmp/G run $C --batch 2 --heads 4 --seq 128 --head-dim 128
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16"
/tmp/G run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
for v in tiled-coop tiled unfused-inplace; do
  T=120 step /tmp/G run --variant $v --backward $SEED --seq 1024 --reps 10 --json $OUT/bwd_f16_N1024_$v.json
done
T=120 step /tmp/G run --variant tiled-coop --backward $SEED --seq 4096 --reps 5 --json $OUT/bwd_f16_N4096.json
T=60 step /tmp/G run --variant tiled-coop $SEED --seq 1024 --reps 20
PYTHONUNBUFFERED=1 T=120 step python3 bench/torch_sdpa.py --backward $SEED --seq 1024 --reps 10 --variants flash,efficient,cudnn
PYTHONUNBUFFERED=1 T=120 step python3 bench/torch_sdpa.py --backward $SEED --seq 4096 --reps 5 --variants flash,cudnn
cd $OUT && tar czf j.tar.gz *.json && rm -f *.json
cat $L
