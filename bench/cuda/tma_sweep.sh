#!/usr/bin/env bash
# One call on the H200 for the TMA variants of the tensor-core decode (decode_turbo_mma_cuda.cu,
# TKV_MMA_CFG selects one): the CUDA tests at the default variant, the tensor-core test cases
# at every variant, then k8v3/k8v4 timings per variant. Run from the repository root with the
# carry dir (make_carry.sh) in $TKV_CARRY; everything goes to $OUT/sweep.txt.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
L=$OUT/sweep.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee -a $L
if [ -z "${TKV_NO_TESTS:-}" ]; then
  for t in kvcodec_cuda_test attention_cuda_test; do
    TKV_MMA_VERBOSE=1 timeout 250 $C/bin/$t > $OUT/t-$t.txt 2>&1; echo "$t rc $?" | tee -a $L
    grep -E "^\[  (PASSED|FAILED)|Failure|FAILED  \]|mma\]" $OUT/t-$t.txt | head -20 | tee -a $L
  done
  for c in ${TKV_TEST_CFGS:-0 1 2 3 4 6}; do
    TKV_MMA_CFG=$c TKV_MMA_VERBOSE=1 timeout 100 $C/bin/attention_cuda_test \
      --gtest_filter='AttentionCuda.MmaPage*:AttentionCuda.GqaRatios' > $OUT/t-cfg.txt 2>&1
    echo "cfg $c tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/t-cfg.txt | tr '\n' ' ')" | tee -a $L
    grep -E "Failure|FAILED  \]|mma\]" $OUT/t-cfg.txt | head -8 | tee -a $L
  done
fi
for s in ${TKV_SCHEMES:-k8v3 k8v4}; do
  for c in ${TKV_BENCH_CFGS:-0 1 2 3 4 5 6}; do
    TKV_MMA_CFG=$c TKV_MMA_VERBOSE=1 timeout 60 $C/bin/tkv_cuda_bench --scheme $s ${TKV_SWEEP_ARGS:---quick} --no-encode \
      --out /tmp/b.json 2>&1 | grep -E "turbokv|cfg|rror" | sed "s/^/cfg $c: /" | tee -a $L
  done
done
