#!/usr/bin/env bash
# One call on the H200 machine: run the CUDA tests and the benchmark from binaries
# built on the dev machine (the GPU image lacks fmt/GTest dev packages), carried in
# $TKV_CARRY (default build/h-cuda2-carry)/{bin,lib,shared}. Logs and JSON go to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
for t in ${TKV_TESTS:-kvcodec_cuda_test attention_cuda_test}; do
  timeout ${TKV_TEST_TIMEOUT:-200} $C/bin/$t 2>&1 | tee -a $OUT/cuda-tests.txt | grep -E "^\[|max err|golden|Failure|error" | tail -60
done
if [ -z "${TKV_NO_BENCH:-}" ]; then
  timeout 300 $C/bin/tkv_cuda_bench --out $OUT/turbokv.json ${TKV_BENCH_ARGS:-} 2>&1 | tee $OUT/bench.txt
  PYTHONUNBUFFERED=1 python3 bench/cuda/torch_sdpa_bench.py $OUT/turbokv.json $OUT/cuda.json 2>&1 | tee -a $OUT/bench.txt
fi
if [ -n "${TKV_GENERAL:-}" ]; then  # the general FP32 kernel on the tensor-core path's shapes
  timeout 200 $C/bin/tkv_cuda_bench --general --no-encode --out $OUT/turbokv-general.json ${TKV_GENERAL_ARGS:-} 2>&1 | tee $OUT/bench-general.txt
fi
if [ -n "${TKV_MINB:-}" ]; then  # the register-capped variant, same shapes (quick set)
  timeout 200 $C/bin/tkv_cuda_bench --minb 3 --no-encode --out $OUT/turbokv-minb3.json ${TKV_MINB_ARGS:-} 2>&1 | tee $OUT/bench-minb3.txt
fi
if [ -n "${TKV_NCU:-}" ]; then  # hardware counters for one shape per scheme (Firecracker only)
  for sm in $TKV_NCU; do
    s=${sm%:*}; mb=${sm#*:}
    timeout 120 ncu --clock-control none --kernel-name regex:"decode_(turbo|turbo_mma|bf16)_kernel" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
      --section LaunchStats --section MemoryWorkloadAnalysis \
      $C/bin/tkv_cuda_bench --scheme $s --batch 8 --ctx 32768 --no-encode --minb $mb --out /tmp/ncu.json > $OUT/ncu-$s-$mb.txt 2>&1
    echo "== ncu $s minb $mb"; grep -E "Duration|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit (Reg|Shared)|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Ipc A" $OUT/ncu-$s-$mb.txt | head -24
  done
fi
