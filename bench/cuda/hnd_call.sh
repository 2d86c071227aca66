#!/usr/bin/env bash
# H200 call of run 13 (head-major pages): the full run_h200.sh (tests, table, SDPA), the
# tensor-core tests with the cp.async kernel forced (TKV_MMA_CFG=0), two repeat processes
# of the quick k8v3/k8v4 shapes, and ncu (speed of light + memory) at k8v3 B=8 x 32k.
# Carry dir in $TKV_CARRY (run_h200.sh beside this script); logs to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
D=$(dirname "$0")
bash $D/run_h200.sh 2>&1 | grep -E "PASSED|FAILED|Failure|turbokv  k8|torch-sdpa|copy|wrote|error" | head -80
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
TKV_MMA_CFG=0 TKV_MMA_VERBOSE=1 timeout 60 $C/bin/attention_cuda_test \
  --gtest_filter='AttentionCuda.MmaPage*:AttentionCuda.GqaRatios' > /tmp/t0.txt 2>&1
echo "cp.async forced: rc $? $(grep -E '^\[  (PASSED|FAILED)|mma\]|Failure' /tmp/t0.txt | sort -u | tr '\n' ' ')" | tee $OUT/forced-cpasync.txt
for r in 1 2; do
  for s in k8v3 k8v4; do
    timeout 40 $C/bin/tkv_cuda_bench --scheme $s --quick --no-encode --out /tmp/q.json 2>&1 | grep "turbokv" | sed "s/^/rep $r: /"
  done
done | tee $OUT/repeats.txt
timeout 60 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --metrics 'dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum' \
  $C/bin/tkv_cuda_bench --scheme k8v3 --batch 8 --ctx 32768 --no-encode --out /tmp/ncu.json > $OUT/ncu-hnd.txt 2>&1
echo "ncu rc $?"
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|L2 Hit Rate|Compute \(SM\)|Registers Per|Achieved Occupancy|dram__bytes_read|lts__t_sector|smsp__inst_executed" $OUT/ncu-hnd.txt | head -16
