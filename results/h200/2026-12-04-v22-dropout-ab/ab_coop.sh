#!/usr/bin/env bash
# A/B of tiled-coop's dropout: d1 = one Philox call per score, d2 = the row quad shares calls.
set -u
out=$1
source bench/h200_env.sh
S="--batch 8 --heads 16 --head-dim 64 --dtype f16 --mode train"
mkdir -p $out
for round in 1 2; do
  for b in d1 d2; do
    for n in 1024 4096; do
      echo "## $b round $round N=$n p=0.1"
      .exp/$b run --variant tiled-coop $S --seq $n --dropout 0.1 --reps 20 --json $out/coop_${b}_N${n}_r$round.json | grep -E "^tiled-coop"
    done
  done
done
echo "## d2 all variants f16 N=1024 p=0.1"
.exp/d2 run --variant all $S --seq 1024 --dropout 0.1 --reps 10 --json $out/all_d2_f16.json | grep -E "^(unfused|math|tiled)"
