#!/usr/bin/env bash
# Lease 15 (stop 27): run15.sh (bwd_kv A/B H / J / L, then the suite with K = main at 737b869)
# the suite is its own call (run16s.sh), plus a look for register counts: each binary's first run writes the NVIDIA driver's shader
# cache to its own folder (tarred back), and the device's CUDA tools (Triton's cuobjdump /
# nvdisasm, if any) are listed.  bash .exp/run16.sh $OUT/l15
set -u
OUT=${1:?}; mkdir -p $OUT; L=$OUT/ab.txt
source bench/h200_env.sh
for b in H J K L; do gunzip -c .exp/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
SEED="--batch 8 --heads 16 --head-dim 64 --dtype f16 --variant tiled-coop --backward"
/tmp/K run --variant tiled --batch 8 --heads 16 --seq 1024 --reps 50 --warmup 20 > /dev/null 2>&1
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
for r in 1 2; do for b in H J L; do
  export __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc/$b; mkdir -p $__GL_SHADER_DISK_CACHE_PATH
  echo "## $b N1024" >> $L
  timeout 40 /tmp/$b run $SEED --seq 1024 --reps 10 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
  echo "## $b N4096" >> $L
  timeout 60 /tmp/$b run $SEED --seq 4096 --reps 3 --verbose 2>&1 | grep -E "^bwd_kv|^bwd_q|rror|FAIL" | cut -c1-100 >> $L
done; done
unset __GL_SHADER_DISK_CACHE_PATH
{ ls -laR /tmp/nvc | head -60; ls -la ~/.cache/nvidia 2>&1 | head;
  python3 -c 'import triton,os;print(os.path.dirname(triton.__file__))' 2>&1;
  find / -xdev \( -name "cuobjdump*" -o -name "nvdisasm*" -o -name "ptxas*" \) 2>/dev/null | head; } > $OUT/tools.txt 2>&1
tar czf $OUT/nvc.tgz -C /tmp nvc 2>/dev/null
cat $L; cat $OUT/tools.txt | tail -15
