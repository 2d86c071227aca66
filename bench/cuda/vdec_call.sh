#!/usr/bin/env bash
# One H200 call for run 12 (decode_turbo_mma_cuda.cu): tests (full suite at TKV_FULL_CFG, the
# tensor-core cases at each of TKV_TEST_CFGS), an interleaved A/B of TKV_MMA_CFG variants on
# the k8 target shapes (TKV_AB_REPS rounds), ncu of TKV_NCU_CFGS at k8v3 B=8 x 32k, SASS counts.
# Carry dir (make_carry.sh) in $TKV_CARRY; logs to $OUT. Run 12 ran it on the pre-cleanup
# binary (variants 1, 3, 7, 8, docs/bench/cuda.md); the code now keeps only the winner and
# the cp.async kernel (TKV_MMA_CFG=0), so the A/B part has nothing left to compare.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
L=$OUT/call.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee -a $L
for t in kvcodec_cuda_test attention_cuda_test; do
  TKV_MMA_CFG=${TKV_FULL_CFG:-3} TKV_MMA_VERBOSE=1 timeout 200 $C/bin/$t > $OUT/t-$t.txt 2>&1
  echo "$t (cfg ${TKV_FULL_CFG:-3}) rc $?" | tee -a $L
  grep -E "^\[  (PASSED|FAILED)|Failure|FAILED  \]|mma\]" $OUT/t-$t.txt | head -12 | tee -a $L
done
grep -E "k8v[34].*mma.*max err/tol" $OUT/t-attention_cuda_test.txt | awk "{print \$4, \$0}" | sort -g -r | head -4 | tee -a $L
for c in ${TKV_TEST_CFGS:-3 8 1}; do
  TKV_MMA_CFG=$c TKV_MMA_VERBOSE=1 timeout 100 $C/bin/attention_cuda_test \
    --gtest_filter='AttentionCuda.MmaPage*:AttentionCuda.GqaRatios:AttentionCuda.OccupancyVariant' > $OUT/t-cfg.txt 2>&1
  echo "cfg $c tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/t-cfg.txt | tr '\n' ' ')" | tee -a $L
  grep -E "Failure|FAILED  \]|mma\]" $OUT/t-cfg.txt | head -6 | tee -a $L
  cat $OUT/t-cfg.txt >> $OUT/t-cfgs.txt
done
A=$OUT/ab.txt
for rep in $(seq ${TKV_AB_REPS:-3}); do
  for s in k8v3 k8v4; do
    cfgs=${TKV_AB_CFGS_V3:-1 3 7 8}; [ $s = k8v4 ] && cfgs=${TKV_AB_CFGS_V4:-1 3}
    for c in $cfgs; do
      for args in "--quick" "--batch 8 --ctx 131072"; do
        TKV_MMA_CFG=$c timeout 60 $C/bin/tkv_cuda_bench --scheme $s $args --no-encode --out /tmp/b.json 2>&1 |
          grep turbokv | sed "s/^/rep $rep cfg $c: /" >> $A
      done
    done
  done
done
awk '{c=$4; sub(":","",c); k=$6" "$7" "$8; us[k" cfg "c]=us[k" cfg "c]" "$9} END {for (x in us) print x ":" us[x]}' $A | sort | tee -a $L
for c in ${TKV_NCU_CFGS:-3 7}; do
  TKV_MMA_CFG=$c timeout 150 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats \
    $C/bin/tkv_cuda_bench --scheme k8v3 --batch 8 --ctx 32768 --no-encode --out /tmp/ncu.json > $OUT/ncu-cfg$c.txt 2>&1
  echo "== ncu cfg $c rc $?" | tee -a $L
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued|Executed Ipc A|Executed Instructions  " $OUT/ncu-cfg$c.txt | head -16 | tee -a $L
done
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass -fun decode_turbo_mma_kernel $C/bin/tkv_cuda_bench > /tmp/mma.sass 2>&1 || cuobjdump -sass $C/bin/tkv_cuda_bench > /tmp/mma.sass 2>&1
  awk '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\/ /{if (f ~ /turbo_mma/) {n[f]++; for (o in op) ; split($2, a, "."); ins=a[1]; if (ins ~ /^@/) {split($3, b, "."); ins=b[1]}; cnt[f" "ins]++}}
       END {for (f in n) {printf "%s total %d:", substr(f, length(f) - 70), n[f]; for (k in cnt) {split(k, z, " "); if (z[1] == f && cnt[k] >= 8) printf " %s %d", z[2], cnt[k]}; printf "\n"}}' /tmp/mma.sass > $OUT/sass-counts.txt
  grep -c . /tmp/mma.sass | tee -a $L
  gzip -c /tmp/mma.sass > $OUT/mma.sass.gz
fi
