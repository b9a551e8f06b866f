#!/usr/bin/env bash
# An A/B in one device call: the same `attn-wgpu run` cases on two or more contenders, interleaved
# case by case (so that clock drift and heat hit every contender alike), one line a run appended to
# OUT as it goes (a call cut short keeps what ran):
#
#   bash bench/ab.sh OUT NAME=BINARY[ ARGS] ... -- CASE ...
#
# NAME=BINARY[ ARGS]: a contender: a binary (BINARY.gz is unpacked first) and `run` arguments added
#   to each of its runs, e.g. 'lazy=/tmp/attn --override TAU=8' against 'classic=/tmp/attn'.
# CASE: the `run` arguments of one case (one variant), quoted, e.g. '--variant tiled --seq 1024
#   --head-dim 128 --dtype f16 --reps 20'; each contender runs it with --host-reps 0. A CASE that begins with
#   `torch ` runs bench/torch_sdpa.py with the rest, once (PyTorch's baselines in the same call).
# A line: CASE | NAME | the variant's row of the table (GPU median µs, p10–p90, memory, bytes,
# verdict; with --backward, then | its training-step row: forward and backward µs) or the error |
# seconds. The first line is the GPU and its driver.
#
# On the lent GPU machine: carry the binaries (gzip -9n: about 7.5 MB each) and .gl; docs/results.md.
set -u
out=${1:?usage: bash bench/ab.sh OUT NAME=BINARY[ ARGS] ... -- CASE ...}
shift
names=() bins=() extra=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in *=*) ;; *) echo "ab.sh: '$1' is not NAME=BINARY[ ARGS]" >&2; exit 2 ;; esac
  name=${1%%=*} rest=${1#*=}
  bin=${rest%% *} args=""
  [ "$bin" = "$rest" ] || args=${rest#* }
  if [ "${bin%.gz}" != "$bin" ]; then
    [ -f "$bin" ] || { echo "ab.sh: '$bin' is not a file" >&2; exit 2; }
    u=$(mktemp /tmp/ab_bin.XXXXXX)
    zcat "$bin" >"$u" && chmod +x "$u"
    bin=$u
  fi
  [ -x "$bin" ] || { echo "ab.sh: '$bin' ($name) is not an executable file" >&2; exit 2; }
  # OUT is appended to: never one of the contenders' files.
  [ "$(realpath -m "$out")" != "$(realpath -m "${rest%% *}")" ] || { echo "ab.sh: OUT '$out' is $name's binary" >&2; exit 2; }
  names+=("$name") bins+=("$bin") extra+=("$args")
  shift
done
[ $# -gt 0 ] && shift
[ ${#names[@]} -gt 0 ] && [ $# -gt 0 ] || { echo "usage: bash bench/ab.sh OUT NAME=BINARY[ ARGS] ... -- CASE ..." >&2; exit 2; }
if ls .gl/*.deb >/dev/null 2>&1; then source bench/device_env.sh; fi

{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || "${bins[0]}" adapters 2>/dev/null | head -1; } | head -1 >>"$out"
for c in "$@"; do
  if [ "${c#torch }" != "$c" ]; then
    t0=$SECONDS
    # shellcheck disable=SC2086
    python3 bench/torch_sdpa.py ${c#torch } 2>&1 | grep -E "^ *(naive|math|flash|efficient|cudnn)" | while read -r l; do
      echo "$c | torch | $l | $((SECONDS - t0)) s" >>"$out"
    done
    continue
  fi
  for i in "${!names[@]}"; do
    t0=$SECONDS
    # shellcheck disable=SC2086
    row=$("${bins[$i]}" run $c ${extra[$i]} --host-reps 0 2>&1 | grep -E "^(error|[a-z][a-z0-9-]* +[0-9]+(\+[0-9]+)? )" | head -2 | paste -sd'|')
    echo "$c | ${names[$i]} | ${row:-no result} | $((SECONDS - t0)) s" >>"$out"
  done
done
