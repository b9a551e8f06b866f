#!/usr/bin/env bash
# Lease of stop 30, call 3: the suite with main at the tip (suite: PyTorch before the sweeps) (tiled-coop-vk on the probed layout,
# ROWS by N, its GLSL backward).   bash .exp/run26.sh $OUT/suite   (timeout_s 460)
D=${1:?}; mkdir -p $D
gunzip -c .exp/M.gz > /tmp/M; chmod +x /tmp/M
mkdir -p /tmp/st; export TMPDIR=/tmp/st
timeout 420 bash bench/h200_suite.sh /tmp/M $D
echo "suite exit $? at $SECONDS s"
if [ ! -f $D/h200.tar.gz ]; then o=$(ls -d /tmp/st/tmp.* | head -1); cp $o/log.txt $D/log.txt; tar czf $D/h200.tar.gz -C $o .; echo "packed after timeout"; fi
