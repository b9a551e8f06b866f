#!/usr/bin/env bash
# Lease 4: tiled-coop H (v27 suite binary: K/V staged once per block of 16 keys, two workgroup
# barriers a block) against I (two K/V stages, one barrier a block) and J (I with 8 subgroups,
# BR = 128); the pick by its D = 64 medians; checks of the pick; the suite again if the pick is
# not H; the attn-wgpu halves of bench/h200_dropout.sh and bench/h200_backward.sh.
set -u
OUT=${1:?}; mkdir -p $OUT; o=$(mktemp -d)
source bench/h200_env.sh
for x in H I J; do gunzip -c .exp/$x.gz > .exp/$x; chmod +x .exp/$x; done
SEED="--batch 8 --heads 16"
step() { echo "## $*"; "$@" 2>&1 | grep -E "^(tiled|split|unfused|math|error|Error)|rror" | cut -c1-150; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
.exp/H run --variant tiled $SEED --seq 1024 --reps 50 --warmup 20 >/dev/null 2>&1
for r in 1 2; do for bin in H I J; do for n in 1024 4096; do
  step .exp/$bin run --variant tiled-coop $SEED --head-dim 64 --seq $n --dtype f16 --reps 20 --json $o/coop_${bin}_D64_N${n}_r$r.json
done; done; done
for bin in H I J; do for d in 128 256; do step .exp/$bin run --variant tiled-coop $SEED --head-dim $d --seq 1024 --dtype f16 --reps 20 --json $o/coop_${bin}_D${d}_N1024.json; done; done
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
    return sum(v) / len(v) if v else None
score = {}
for b in "HIJ":
    a, c = med(b, 1024), med(b, 4096)
    if a and c: score[b] = a / med("H", 1024) + c / med("H", 4096)
print(min(score, key=score.get))
PY
)
PICK=${PICK:-H}
echo "## pick: $PICK" >> $o/ab.txt
{
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --head-dim 64 --seq 1024 --dtype f16 --reps 5 --dropout 0.1
  step .exp/$PICK run --variant tiled-coop $SEED --head-dim 64 --seq 1024 --dtype f16 --reps 5 --override LO=2 --tolerance strict
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --head-dim 80 --seq 1000 --dtype f16 --reps 5 --key-padding 900,317
  step .exp/$PICK run --variant tiled-coop --batch 2 --heads 16 --kv-heads 4 --head-dim 128 --seq 700 --kv-seq 900 --causal bottom-right --dtype f16 --reps 5
  step .exp/$PICK run --variant tiled-coop --batch 3 --heads 5 --head-dim 48 --seq 77 --dtype f16 --reps 5 --no-causal
  echo "### D256: after the other variants in one process, then alone"
  step .exp/$PICK run --variant all $SEED --head-dim 256 --seq 1024 --dtype f16 --reps 10
  step .exp/$PICK run --variant tiled-coop $SEED --head-dim 256 --seq 1024 --dtype f16 --reps 10
} >> $o/ab.txt 2>&1
cat $o/ab.txt
if [ "$PICK" != H ]; then mkdir -p $o/tmp_suite; TMPDIR=$o/tmp_suite timeout 200 bash bench/h200_suite.sh .exp/$PICK $o/suite > $o/suite_out.txt 2>&1; echo "suite rc=$? at ${SECONDS}s" >> $o/ab.txt; fi
[ $SECONDS -lt 330 ] && { mkdir -p $o/tmp_dropout; TMPDIR=$o/tmp_dropout timeout $((470 - SECONDS)) bash bench/h200_dropout.sh .exp/$PICK $o/dropout attn > $o/dropout_out.txt 2>&1; echo "dropout rc=$? at ${SECONDS}s" >> $o/ab.txt; }
[ $SECONDS -lt 450 ] && { mkdir -p $o/tmp_backward; TMPDIR=$o/tmp_backward timeout $((540 - SECONDS)) bash bench/h200_backward.sh .exp/$PICK $o/backward > $o/backward_out.txt 2>&1; echo "backward rc=$? at ${SECONDS}s" >> $o/ab.txt; }
cp $o/ab.txt $OUT/; tar czf $OUT/r4.tar.gz -C $o .
tail -8 $o/ab.txt
