#!/usr/bin/env bash
# Stop 31, call 2 (timeout_s 600): bench/h200_suite.sh with main at its tip (M).
#   bash .exp/run30.sh $OUT/suite
D=${1:?}; mkdir -p $D
gunzip -c .exp/M.gz > /tmp/M; chmod +x /tmp/M
mkdir -p /tmp/st; export TMPDIR=/tmp/st
timeout 588 bash bench/h200_suite.sh /tmp/M $D
echo "suite exit $? at $SECONDS s"
if [ ! -f $D/h200.tar.gz ]; then o=$(ls -d /tmp/st/tmp.* | head -1); cp $o/log.txt $D/log.txt; tar czf $D/h200.tar.gz -C $o .; echo "packed after timeout"; fi
