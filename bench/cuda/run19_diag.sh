#!/usr/bin/env bash
# Run 19 (docs/bench/cuda.md): the decode's fixed-cost split by diagnostic builds.
# Here, per variant n in 1..5 (run19_diag.patch: 1 no merge, 2 no partial/merge, 3 no math,
# 4 loads only, 5 the partial twice), with the patch applied:
#   cmake -S . -B build/diag$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DTKV_CUDA=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90 -DTKV_BUILD_BENCH=ON -DCMAKE_CUDA_FLAGS=-DTKV_DIAG=$n
#   ninja -C build/diag$n tkv_cuda_bench; cp build/diag$n/bench/cuda/tkv_cuda_bench <carry>/bin/bench_diag$n
# (then revert the patch and build the normal carry: bench/cuda/make_carry.sh, cp bench/cuda/*.sh).
# On the H200: bash build/h-cuda2-carry/run19_diag.sh -> $OUT/ab.txt, $OUT/page.txt
C=${TKV_CARRY:-build/h-cuda2-carry}
export LD_LIBRARY_PATH=$PWD/$C/lib:${LD_LIBRARY_PATH:-}
B="full=$C/bin/tkv_cuda_bench"
for d in 1 2 3 4 5; do [ -x $C/bin/bench_diag$d ] && B="$B d$d=$C/bin/bench_diag$d"; done
TKV_AB_ROUNDS=${TKV_AB_ROUNDS:-2} TKV_AB_SHAPES="k8v3 1 131072;k8v3 8 32768;k8v3 8 131072;k8v3 1 32768" \
  TKV_AB_BINS="$B" bash $C/ab_bins.sh | sed 's/  */ /g'
for pg in 128 256; do  # page size and page order, the normal binary
  for sh in "1 131072" "8 32768"; do set -- $sh
    echo "page $pg $($C/bin/tkv_cuda_bench --scheme k8v3 --batch $1 --ctx $2 --no-encode --no-copy --page $pg --out /tmp/p.json 2>&1 | grep ^turbokv)"
    echo "page 64 noshuffle $($C/bin/tkv_cuda_bench --scheme k8v3 --batch $1 --ctx $2 --no-encode --no-copy --no-shuffle --out /tmp/p.json 2>&1 | grep ^turbokv)"
  done
done | sed 's/  */ /g' | tee $OUT/page.txt
