#!/usr/bin/env bash
# Lease 18 (stop 27): the training-step bench with T = main at the tip (bwd_kv 10880 bytes, bwd_q
# eight subgroups).   bash .exp/run19.sh $OUT/bwd
set -u
gunzip -c .exp/T.gz > /tmp/T; chmod +x /tmp/T
timeout 560 bash bench/h200_backward.sh /tmp/T ${1:?} > /dev/null 2>&1
tail -40 ${1}/log.txt | cut -c1-160
