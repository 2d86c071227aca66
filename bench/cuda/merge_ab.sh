#!/usr/bin/env bash
# A/B of the tensor-core path's merge on the H200 (run 16), interleaved, two rounds:
#   cluster  = default (partitions of a row merged in a thread block cluster through
#              distributed shared memory where the plan allows; caller-kept counters elsewhere)
#   counters = --no-cluster (the last block of a row merges through the workspace; counters kept)
#   reset    = --no-cluster --reset-counters (run 15's path: a cudaMemsetAsync per call)
# Carry dir in $TKV_CARRY; log to $OUT/merge-ab.txt.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
for round in 1 2; do
  for shape in "k8v3 1 32768" "k8v3 1 131072" "k8v3 8 4096" "k8v3 8 32768" "k8v3 8 131072" "k4v2 8 32768" "k8v3 32 32768"; do
    set -- $shape
    for cfg in cluster counters reset; do
      case $cfg in cluster) args="" ;; counters) args="--no-cluster" ;; reset) args="--no-cluster --reset-counters" ;; esac
      line=$(timeout 60 $C/bin/tkv_cuda_bench --scheme $1 --batch $2 --ctx $3 --no-encode --no-copy $args \
             --out /tmp/ab.json 2>&1 | grep "^turbokv")
      echo "round $round  $cfg  $line"
    done
  done
done | tee $OUT/merge-ab.txt
