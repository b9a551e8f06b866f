#!/usr/bin/env bash
# Lease 15, second call: the suite with K (main at 737b869).  bash .exp/run16s.sh $OUT/suite
set -u
gunzip -c .exp/K.gz > /tmp/K; chmod +x /tmp/K
timeout 570 bash bench/h200_suite.sh /tmp/K ${1:?} > /dev/null 2>&1
tail -30 ${1}/log.txt | cut -c1-160
