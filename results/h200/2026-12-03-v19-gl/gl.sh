#!/usr/bin/env bash
# Lease: why wgpu's GL backend fails at request_device on the H200 (issue 17): wgpu-hal's log
# under a few EGL settings.
set -u
out=$1; mkdir -p $out
source bench/h200_env.sh
B=.exp/gl
{
echo "## EGL libraries"; ldconfig -p | grep -iE "egl|libGL|gles" ; ls /usr/local/nvidia/lib64 2>/dev/null | grep -iE "egl|gl" | head -30
ls /usr/local/nvidia/share/glvnd/egl_vendor.d/ /usr/share/glvnd/egl_vendor.d/ 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv
for envs in "" "__EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json" "__EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json EGL_PLATFORM=surfaceless" "__EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json EGL_PLATFORM=device"; do
  echo "## env: $envs"
  env $envs RUST_LOG=wgpu_hal=debug,wgpu_core=info timeout 60 $B run --backend gl --variant unfused --seq 64 --heads 1 --reps 1 2>&1 | grep -v "^\s*$" | cut -c1-300 | tail -70
  echo "## exit ${PIPESTATUS[0]}"
done
} > $out/gl_log.txt 2>&1
grep -E "^## |ERROR|WARN|error|Using|platform|context|version|Parent" $out/gl_log.txt | cut -c1-200 | head -80
