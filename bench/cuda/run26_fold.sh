#!/usr/bin/env bash
# Run 26 (one device call): the V scale folded into P (pv_tile) against the previous
# commit's bench binary. Carry dir build/h-cuda2-carry holds bin/tkv_cuda_bench (new),
# bin/bench_base (built at the base commit) and bin/bench_s8 (new, -DTKV_LEAN_SLACK=8).
# Tests, interleaved A/B (ab_bins.sh, 3 rounds), Nsight Compute instruction counts.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export TKV_SHARED_DIR=$PWD/$C/shared
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/gpu.txt
for t in kvcodec_cuda_test attention_cuda_test; do
  echo "== $t" | tee -a $OUT/tests.txt
  timeout 240 $C/bin/$t 2>&1 | tee -a $OUT/tests.txt | grep -E "^\[  (PASSED|FAILED)|FAILED|max err"
done
TKV_AB_ROUNDS=3 TKV_AB_SHAPES="k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768;k8v3 32 32768;k8v3 8 4096" \
  TKV_AB_BINS="base=$C/bin/bench_base fold=$C/bin/tkv_cuda_bench" bash bench/cuda/ab_bins.sh | sed 's/  */ /g' > $OUT/ab1.txt
TKV_AB_ROUNDS=3 TKV_AB_SHAPES="k8v4 8 32768;k8v4 1 131072;k4v3 8 32768;k4v2 8 32768" \
  TKV_AB_BINS="base=$C/bin/bench_base fold=$C/bin/tkv_cuda_bench s8=$C/bin/bench_s8" bash bench/cuda/ab_bins.sh | sed 's/  */ /g' > $OUT/ab2.txt
cat $OUT/ab1.txt $OUT/ab2.txt | awk '{print $2, $3, $4, $5, $6, $7, $8, $9, $10}'
for b in bench_base tkv_cuda_bench; do
  for sh in "k8v3 1 131072" "k8v3 8 32768" "k4v2 8 32768"; do
    set -- $sh
    echo "== ncu $b $sh"
    timeout 60 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 3 --launch-count 1 \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum \
      $C/bin/$b --scheme $1 --batch $2 --ctx $3 --no-encode --no-copy --out /tmp/ncu.json 2>&1 | grep -E "__|Duration"
  done
done | tee $OUT/ncu.txt
