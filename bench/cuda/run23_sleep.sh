#!/usr/bin/env bash
# Run 23 (docs/bench/cuda.md): a suspend-time hint on the tensor-core decode's mbarrier
# waits (the producer warps re-polled the "empty" barrier ~52 times per tile: 7 % of the
# issue slots, run 22). On the H200, from the carry (make_carry.sh + bench/cuda/*.sh, plus
# bin/bench_sp, bin/bench_spc, bin/attention_sp, bin/attention_spc built with
# -DCMAKE_CUDA_FLAGS="-DTKV_SUSPEND_P=10000000 [-DTKV_SUSPEND_C=10000000]"): their CUDA
# tests, an interleaved A/B base / sp (producer waits) / spc (producer and consumer waits),
# ncu instruction and issue counters at k8v3 B=1 x 128k. Logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for t in attention_sp attention_spc; do
  timeout 200 $C/bin/$t > /tmp/$t.txt 2>&1; echo "$t rc $?"; cat /tmp/$t.txt >> $OUT/tests.txt
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" /tmp/$t.txt
done
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-3} TKV_AB_SHAPES=${TKV_AB_SHAPES:-"k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k8v3 32 32768;k4v2 8 32768;bf16 1 131072;bf16 8 32768"} \
  TKV_AB_BINS="base=$C/bin/tkv_cuda_bench sp=$C/bin/bench_sp spc=$C/bin/bench_spc" bash $C/ab_bins.sh > /dev/null
cut -c1-110 $OUT/ab.txt | sed 's/  */ /g'
for v in tkv_cuda_bench bench_sp bench_spc; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --metrics 'gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed' \
    $C/bin/$v --scheme k8v3 --batch 1 --ctx 131072 --no-encode --no-copy --out /tmp/ncu.json > /tmp/ncu-$v.txt 2>&1
  cat /tmp/ncu-$v.txt >> $OUT/ncu.txt
  grep -E "__" /tmp/ncu-$v.txt | sed 's/  */ /g'
done
