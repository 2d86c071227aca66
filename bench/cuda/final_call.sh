#!/usr/bin/env bash
# Final H200 call of a run (runs 15-17): the full run_h200.sh (tests, table at the bench's
# default page 64, SDPA), the table again at page 16 (vLLM's page), an interleaved A/B of
# page 16 against a baseline binary ($TKV_BASE_BIN, if present), encode + decode steps with and
# without programmatic launch (k8v3, --step), the tensor-core cases with
# the cp.async kernel forced (TKV_MMA_CFG=0), and ncu with per-reason stall counters at
# k8v3 B=8 x 32k. Carry dir in $TKV_CARRY; logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
bash bench/cuda/run_h200.sh 2>&1 | grep -E "PASSED|FAILED|turbokv  k8|torch-sdpa|copy|wrote" | head -80
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
timeout 200 $C/bin/tkv_cuda_bench --page 16 --no-encode --out $OUT/turbokv-page16.json 2>&1 | grep -E "k8v3|copy" | tee $OUT/bench-page16.txt
timeout 200 $C/bin/tkv_cuda_bench --scheme k8v3 --step --no-encode --no-copy --out $OUT/turbokv-step.json 2>&1 | grep -E "^step" | tee $OUT/bench-step.txt
BASE=${TKV_BASE_BIN:-$C/bin/bench_base}
if [ -x "$BASE" ]; then
  TKV_AB_ROUNDS=2 TKV_AB_SHAPES="k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k4v2 8 32768" \
    TKV_AB_BINS="base=$BASE new16=$C/bin/tkv_cuda_bench" TKV_AB_ARGS="--page 16" bash bench/cuda/ab_bins.sh | sed 's/  */ /g'
fi
TKV_MMA_CFG=0 TKV_MMA_VERBOSE=1 timeout 100 $C/bin/attention_cuda_test \
  --gtest_filter='AttentionCuda.Mma*:AttentionCuda.GqaRatios' > /tmp/t0.txt 2>&1
echo "cp.async forced: rc $? $(grep -E '^\[  (PASSED|FAILED)|mma\]' /tmp/t0.txt | sort -u | tr '\n' ' ')" | tee $OUT/forced-cpasync.txt
timeout 150 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,dram__bytes_read.sum,smsp__inst_executed.sum' \
  $C/bin/tkv_cuda_bench --scheme k8v3 --batch 8 --ctx 32768 --no-encode --out /tmp/ncu.json > $OUT/ncu-final.txt 2>&1
echo "ncu rc $?"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache|Compute \(SM\)|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |dram__bytes_read" $OUT/ncu-final.txt | head -14
grep -E "issue_stalled" $OUT/ncu-final.txt | awk '{print $NF, $1}' | sort -g -r | head -12
