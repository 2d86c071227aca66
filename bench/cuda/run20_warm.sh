#!/usr/bin/env bash
# Run 20 (docs/bench/cuda.md): the epilogue's dry warm-up pass. On the H200, from the carry
# (make_carry.sh + bench/cuda/*.sh + bin/bench_base = tkv_cuda_bench built at the previous
# commit): the CUDA tests (warm pass on, and the tensor-core cases with it off), then an
# interleaved A/B base / new (warm) / new with TKV_MMA_WARM=0, then ncu stall counters of
# base and new at k8v3 B=1 x 128k. Logs to $OUT (tests.txt, ab.txt, ncu.txt).
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for t in kvcodec_cuda_test attention_cuda_test; do
  timeout 200 $C/bin/$t > /tmp/$t.txt 2>&1; echo "$t rc $?"; cat /tmp/$t.txt >> $OUT/tests.txt
  grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" /tmp/$t.txt
done
TKV_MMA_WARM=0 timeout 100 $C/bin/attention_cuda_test --gtest_filter='AttentionCuda.Mma*' > /tmp/t0.txt 2>&1
echo "warm off, Mma*: rc $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t0.txt | tr '\n' ' ')"
printf '#!/bin/sh\nTKV_MMA_WARM=0 exec %s "$@"\n' $PWD/$C/bin/tkv_cuda_bench > /tmp/nowarm.sh; chmod +x /tmp/nowarm.sh
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-3} TKV_AB_SHAPES=${TKV_AB_SHAPES:-"k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k4v2 8 32768;bf16 1 131072"} \
  TKV_AB_BINS="base=$C/bin/bench_base warm=$C/bin/tkv_cuda_bench nowarm=/tmp/nowarm.sh" bash $C/ab_bins.sh | sed 's/  */ /g' > /dev/null
cut -c1-110 $OUT/ab.txt
for b in base=$C/bin/bench_base warm=$C/bin/tkv_cuda_bench; do
  echo "== ncu ${b%%=*}"
  timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --section WarpStateStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,smsp__inst_executed.sum' \
    ${b#*=} --scheme k8v3 --batch 1 --ctx 131072 --no-encode --no-copy --out /tmp/ncu.json > /tmp/ncu-${b%%=*}.txt 2>&1
  cat /tmp/ncu-${b%%=*}.txt >> $OUT/ncu.txt
  grep -E "gpu__time|inst_executed.sum|no_instruction|branch_resolving|barrier|long_score|wait " /tmp/ncu-${b%%=*}.txt | sed 's/  */ /g'
done
