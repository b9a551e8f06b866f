#!/usr/bin/env bash
# Lease 3: tiled-coop key blocks at D = 64 (E: 64 keys, G: 32, H: 16; E's kernel in all three),
# the pick of the three by its medians, checks of the pick (dropout, LO=2 strict, key padding,
# D = 80), then the measurement suite (bench/h200_suite.sh) with the pick.
set -u
OUT=${1:?}; mkdir -p $OUT; o=$(mktemp -d)
source bench/h200_env.sh
for x in E G H; do gunzip -c .exp/$x.gz > .exp/$x; chmod +x .exp/$x; done
SEED="--batch 8 --heads 16"
step() { echo "## $*"; "$@" 2>&1 | grep -E "^(tiled|split|error|Error)|rror" | cut -c1-150; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
.exp/E run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
for r in 1 2; do for bin in E G H; do for n in 1024 4096; do
  step .exp/$bin run --variant tiled-coop $SEED --head-dim 64 --seq $n --dtype f16 --reps 20 --json $o/coop_${bin}_D64_N${n}_r$r.json
done; done; done
for bin in E H; do step .exp/$bin run --variant tiled-coop $SEED --head-dim 128 --seq 1024 --dtype f16 --reps 20 --json $o/coop_${bin}_D128_N1024.json; done
} > $o/ab.txt 2>&1
PICK=$(python3 - "$o" <<'PY'
import json, sys, glob
o = sys.argv[1]
def med(b, n):
    v = []
    for f in glob.glob(f"{o}/coop_{b}_D64_N{n}_r*.json"):
        r = json.load(open(f))["runs"][0]
        if r["validation"]["verdict"] != "PASS": return None
        v.append(r["forward"]["gpu_span_us"]["median"])
    return sum(v) / len(v)
score = {}
for b in "EGH":
    a, c = med(b, 1024), med(b, 4096)
    if a and c: score[b] = a / med("E", 1024) + c / med("E", 4096)
print(min(score, key=score.get))
PY
)
echo "## pick: ${PICK:-E} (scores in the A/B above)" >> $o/ab.txt
PICK=${PICK:-E}
{
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
  step .exp/$PICK run --variant tiled-coop $SEED --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 128 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5
} >> $o/ab.txt 2>&1
cat $o/ab.txt
timeout 470 bash bench/h200_suite.sh .exp/$PICK $o/suite > $o/suite_out.txt 2>&1; echo "suite rc=$?" >> $o/ab.txt
if [ ! -f $o/suite/log.txt ]; then d=$(ls -td /tmp/tmp.* | head -1); mkdir -p $o/suite_partial; cp -r $d/. $o/suite_partial/; cp $d/log.txt $OUT/suite_partial_log.txt; fi
cp $o/ab.txt $OUT/; tar czf $OUT/r3.tar.gz -C $o .
tail -60 $o/suite/log.txt $o/suite_partial/log.txt 2>/dev/null | cut -c1-150
