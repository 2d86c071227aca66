#!/usr/bin/env bash
# Run 25 (docs/bench/cuda.md): the consumer's full-tile path (no masks, no -inf tests in the
# loop's steady state) and, as a build option, a rescale slack (the running max moves only
# when a tile's max exceeds it by more than 8 in log2 units). On the H200, from the carry
# (make_carry.sh of the new code + bench/cuda/*.sh, bin/bench_base = the previous commit's
# tkv_cuda_bench, bin/bench_slack + bin/attention_slack built with
# -DCMAKE_CUDA_FLAGS=-DTKV_SOFTMAX_SLACK=8): the CUDA tests of both, an interleaved A/B
# base / full / slack, ncu instruction counts. Logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for t in kvcodec_cuda_test attention_cuda_test attention_slack; do
  timeout 200 $C/bin/$t > /tmp/$t.txt 2>&1; echo "$t rc $?"; { echo "== $t"; cat /tmp/$t.txt; } >> $OUT/tests.txt
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" /tmp/$t.txt
done
TKV_MMA_CFG=0 timeout 200 $C/bin/attention_cuda_test --gtest_filter='AttentionCuda.Mma*' > /tmp/cp.txt 2>&1
echo "cp.async kernel, Mma*: rc $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/cp.txt | tr '\n' ' ')"
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-3} TKV_AB_SHAPES=${TKV_AB_SHAPES:-"k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k8v3 32 32768;k8v4 8 32768;k4v2 8 32768;k4v3 8 32768;bf16 1 131072;bf16 8 32768"} \
  TKV_AB_BINS="base=$C/bin/bench_base full=$C/bin/tkv_cuda_bench slack=$C/bin/bench_slack" bash $C/ab_bins.sh > /dev/null
cut -c1-110 $OUT/ab.txt | sed 's/  */ /g'
for v in bench_base tkv_cuda_bench bench_slack; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --metrics 'gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active' \
    $C/bin/$v --scheme k8v3 --batch 1 --ctx 131072 --no-encode --no-copy --out /tmp/ncu.json > /tmp/ncu-$v.txt 2>&1
  cat /tmp/ncu-$v.txt >> $OUT/ncu.txt
  grep -E "__" /tmp/ncu-$v.txt | sed 's/  */ /g'
done
