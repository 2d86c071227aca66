#!/usr/bin/env bash
# Run 26's final call: the CUDA tests, the full table with SDPA (run_h200.sh), the k8v3
# step table, and the interleaved target-shape ratios (target_ab.py). Carry dir
# build/h-cuda2-carry (make_carry.sh); at most 8 files to $OUT.
set -o pipefail
C=${TKV_CARRY:-build/h-cuda2-carry}
bash bench/cuda/run_h200.sh 2>&1 | grep -E "PASSED|FAILED|turbokv  k8|torch-sdpa|copy|wrote|encode" | head -80
rm -f $OUT/turbokv.json  # merged into cuda.json
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
timeout 200 $C/bin/tkv_cuda_bench --scheme k8v3 --step --no-encode --no-copy --out $OUT/turbokv-step.json 2>&1 | grep -E "^step" | tee $OUT/bench-step.txt
PYTHONUNBUFFERED=1 timeout 200 python3 bench/cuda/target_ab.py $C/bin/tkv_cuda_bench 3 2>&1 | tee $OUT/target-ab.txt
