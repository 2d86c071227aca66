#!/usr/bin/env bash
# Run 24 (docs/bench/cuda.md): setmaxnreg for the 16-warp tensor-core decode (the producer
# warpgroup drops to 24 registers, the 4 consumer warpgroups rise from 96 to 112; sm_90a
# only). On the H200, from the carry (make_carry.sh + bench/cuda/*.sh, plus bin/bench_a90 =
# the base code built for sm_90a, bin/bench_mr and bin/attention_mr built for sm_90a with
# -DCMAKE_CUDA_FLAGS="-DTKV_MAXNREG=112 -DTKV_MAXNREG_P=24"): the highest register the
# k8v3 kernel's SASS names, the tests, an interleaved A/B base / a90 / mr, ncu counters.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for b in tkv_cuda_bench bench_a90 bench_mr; do
  f=$(cuobjdump -symbols $C/bin/$b 2>/dev/null | grep -o '_ZN[^ ]*decode_turbo_mma_kernelILi8ELi3ELi2ELi16E[^ ]*' | head -1)
  cuobjdump -sass -fun "$f" $C/bin/$b > /tmp/sass-$b.txt 2>&1
  echo "$b: $(wc -l < /tmp/sass-$b.txt) sass lines, highest register R$(grep -o '\bR[0-9]\+' /tmp/sass-$b.txt | tr -d R | sort -n | tail -1), setmaxnreg: $(grep -c -i 'USETMAXREG' /tmp/sass-$b.txt)"
  cp /tmp/sass-$b.txt $OUT/
done
timeout 200 $C/bin/attention_mr > /tmp/at.txt 2>&1; echo "attention_mr rc $?"; cat /tmp/at.txt >> $OUT/tests.txt
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" /tmp/at.txt
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-3} TKV_AB_SHAPES=${TKV_AB_SHAPES:-"k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k8v3 32 32768;k8v4 8 32768;k4v2 8 32768;bf16 1 131072"} \
  TKV_AB_BINS="base=$C/bin/tkv_cuda_bench a90=$C/bin/bench_a90 mr=$C/bin/bench_mr" bash $C/ab_bins.sh > /dev/null
cut -c1-110 $OUT/ab.txt | sed 's/  */ /g'
for v in tkv_cuda_bench bench_mr; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --metrics 'gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed' \
    $C/bin/$v --scheme k8v3 --batch 1 --ctx 131072 --no-encode --no-copy --out /tmp/ncu.json > /tmp/ncu-$v.txt 2>&1
  cat /tmp/ncu-$v.txt >> $OUT/ncu.txt
  grep -E "__" /tmp/ncu-$v.txt | sed 's/  */ /g'
done
