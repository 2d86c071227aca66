#!/usr/bin/env bash
# Interleaved A/B of several tkv_cuda_bench binaries (name=path ...) on the shapes in
# $TKV_AB_SHAPES ("scheme batch ctx;..."), $TKV_AB_ROUNDS rounds (2), one process per
# binary and shape (extra bench flags in $TKV_AB_ARGS); then, with $TKV_AB_NCU, Nsight Compute shared-memory wavefronts and
# bank conflicts of each binary at k8v3 B=8 x 32k. Log: $OUT/ab.txt, $OUT/ab-ncu.txt.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
SHAPES=${TKV_AB_SHAPES:-"k8v3 1 32768;k8v3 1 131072;k8v3 8 4096;k8v3 8 32768;k8v3 8 131072;k8v3 32 32768;k8v4 8 32768;k4v2 8 32768"}
for round in $(seq 1 ${TKV_AB_ROUNDS:-2}); do
  IFS=';' read -ra list <<< "$SHAPES"
  for shape in "${list[@]}"; do
    set -- $shape
    for bin in $TKV_AB_BINS; do
      name=${bin%%=*}; path=${bin#*=}
      line=$(timeout 60 $path --scheme $1 --batch $2 --ctx $3 --no-encode --no-copy ${TKV_AB_ARGS:-} --out /tmp/ab.json 2>&1 | grep "^turbokv")
      echo "round $round  $name  $line"
    done
  done
done | tee $OUT/ab.txt
if [ -n "${TKV_AB_NCU:-}" ]; then
  for bin in $TKV_AB_BINS; do
    name=${bin%%=*}; path=${bin#*=}
    echo "== $name"
    timeout 120 ncu --clock-control none --kernel-name regex:"decode_turbo_mma_kernel" --launch-skip 3 --launch-count 1 \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      $path --scheme k8v3 --batch 8 --ctx 32768 --no-encode --no-copy --out /tmp/ncu.json 2>&1 | grep -E "__|Duration" 
  done | tee $OUT/ab-ncu.txt
fi
