#!/usr/bin/env bash
# bench/torch_sdpa.py --inputs with a mask.npy, on real torch + CUDA: the inputs and the mask come
# from attn-wgpu run --save-inputs (key padding, and an explicit bool mask read as MHA).
set -u
B=$1; out=$2; o=$(mktemp -d)
source bench/h200_env.sh
step() { echo "## $*"; "$@"; echo "## exit $?"; }
{
  mkdir -p $o/kp $o/mha
  step $B run --variant unfused --batch 2 --heads 2 --seq 128 --head-dim 64 --dtype f16 --key-padding 100,1 --reps 2 --save-inputs $o/kp
  step python3 bench/torch_sdpa.py --inputs $o/kp --dtype f16 --reps 5 --json $o/torch_kp.json
  python3 -c "import numpy as np; np.random.seed(1); np.save('$o/m.npy', np.random.rand(2,1,128,128) > 0.7)"
  step $B run --variant unfused-inplace --batch 2 --heads 2 --seq 128 --head-dim 64 --dtype f32 --mask $o/m.npy --mask-convention mha --reps 2 --save-inputs $o/mha
  step python3 bench/torch_sdpa.py --inputs $o/mha --dtype f32 --reps 5 --json $o/torch_mha.json
} > "$o/log.txt" 2>&1
mkdir -p "$out"; cp "$o/log.txt" "$o"/torch_*.json "$out/" 2>/dev/null
grep -vE "^\s*$" "$o/log.txt" | grep -E "^## |Validation|naive|math|flash|efficient|cudnn|rror" | cut -c1-170
