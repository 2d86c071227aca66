#!/usr/bin/env bash
# Run 21 (docs/bench/cuda.md): L2 eviction hints on the tensor-core decode's copies. On the
# H200, from the carry (make_carry.sh + bench/cuda/*.sh + bin/bench_base = tkv_cuda_bench
# of the previous commit): the CUDA tests with TKV_L2HINT=1, the Mma* cases with =2; an
# interleaved A/B of base / new with hint 0 / 1 (K, V, scales evict_first) / 2 (K, V only)
# / tensor-map L2 promotion 256 B / none; then ncu L2 and DRAM counters at k8v3 B=1 x 128k.
# Logs to $OUT (tests.txt, ab.txt, ncu.txt).
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 100 $C/bin/kvcodec_cuda_test > /tmp/kv.txt 2>&1; echo "kvcodec_cuda_test rc $?"; cat /tmp/kv.txt >> $OUT/tests.txt
TKV_L2HINT=1 timeout 200 $C/bin/attention_cuda_test > /tmp/at.txt 2>&1; echo "attention_cuda_test hint 1 rc $?"
cat /tmp/at.txt >> $OUT/tests.txt; grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" /tmp/kv.txt /tmp/at.txt
TKV_L2HINT=2 timeout 100 $C/bin/attention_cuda_test --gtest_filter='AttentionCuda.Mma*' > /tmp/t2.txt 2>&1
echo "hint 2, Mma*: rc $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t2.txt | tr '\n' ' ')"
TKV_L2PROMO=3 timeout 100 $C/bin/attention_cuda_test --gtest_filter='AttentionCuda.Mma*' > /tmp/t3.txt 2>&1
echo "promo 256, Mma*: rc $? $(grep -E '^\[  (PASSED|FAILED)' /tmp/t3.txt | tr '\n' ' ')"
mk() { printf '#!/bin/sh\n%s exec %s "$@"\n' "$2" $PWD/$C/bin/tkv_cuda_bench > /tmp/$1.sh; chmod +x /tmp/$1.sh; }
mk h0 "TKV_L2HINT=0"; mk h1 "TKV_L2HINT=1"; mk h2 "TKV_L2HINT=2"; mk p256 "TKV_L2PROMO=3"; mk pnone "TKV_L2PROMO=0"
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-3} TKV_AB_SHAPES=${TKV_AB_SHAPES:-"k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k4v2 8 32768;bf16 1 131072;bf16 8 32768"} \
  TKV_AB_BINS="base=$C/bin/bench_base h0=/tmp/h0.sh h1=/tmp/h1.sh h2=/tmp/h2.sh p256=/tmp/p256.sh pnone=/tmp/pnone.sh" bash $C/ab_bins.sh > /dev/null
cut -c1-110 $OUT/ab.txt | sed 's/  */ /g'
for v in h0 h1; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none --cache-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 5 --launch-count 1 \
    --metrics 'gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,dram__throughput.avg.pct_of_peak_sustained_elapsed' \
    /tmp/$v.sh --scheme k8v3 --batch 1 --ctx 131072 --no-encode --no-copy --out /tmp/ncu.json > /tmp/ncu-$v.txt 2>&1
  cat /tmp/ncu-$v.txt >> $OUT/ncu.txt
  grep -E "__" /tmp/ncu-$v.txt | sed 's/  */ /g'
done
