#!/usr/bin/env bash
# A/B of the tensor-core path's merge counters on the H200, interleaved, two rounds:
#   kept  = default (caller-kept counters, zeroed once; each call leaves them zero)
#   reset = --reset-counters (the workspace's counters, a cudaMemsetAsync per call)
# Run 16 (at commit cc22e30) also had a third arm, a thread block cluster merge, since
# removed (docs/bench/cuda.md). Carry dir in $TKV_CARRY; log to $OUT/merge-ab.txt.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
for round in 1 2; do
  for shape in "k8v3 1 32768" "k8v3 1 131072" "k8v3 8 4096" "k8v3 8 32768" "k8v3 8 131072" "k4v2 8 32768" "k8v3 32 32768"; do
    set -- $shape
    for cfg in kept reset; do
      args=""; [ $cfg = reset ] && args="--reset-counters"
      line=$(timeout 60 $C/bin/tkv_cuda_bench --scheme $1 --batch $2 --ctx $3 --no-encode --no-copy $args \
             --out /tmp/ab.json 2>&1 | grep "^turbokv")
      echo "round $round  $cfg  $line"
    done
  done
done | tee $OUT/merge-ab.txt
