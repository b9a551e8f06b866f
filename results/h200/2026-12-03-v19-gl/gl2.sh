#!/usr/bin/env bash
set -u
out=$1; mkdir -p $out
source bench/h200_env.sh
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
{
RUST_LOG=wgpu_hal=debug,wgpu_core=info timeout 60 .exp/gl adapters --backend gl 2>&1 | grep -vE '^\s+"' | cut -c1-300 | head -60
echo "## run"
RUST_LOG=wgpu_hal=trace,wgpu_core=info timeout 60 .exp/gl run --backend gl --variant unfused --seq 64 --heads 1 --reps 1 2>&1 | grep -vE '^\s+"' | cut -c1-300 | head -80
} > $out/gl2_log.txt 2>&1
cat $out/gl2_log.txt | head -120
