#!/usr/bin/env bash
# Copies the locally built CUDA test/bench binaries, the shared libraries the GPU
# image lacks (fmt, cudart) and the goldens into the carry dir for `run`.
# Usage: make_carry.sh [build dir (build/h-cuda2)] [carry dir (build/h-cuda2-carry)]
set -e
B=${1:-build/h-cuda2}
C=${2:-build/h-cuda2-carry}
rm -rf $C && mkdir -p $C/bin $C/lib $C/shared/goldens
cp $B/tests/cuda/kvcodec_cuda_test $B/tests/cuda/attention_cuda_test $B/bench/cuda/tkv_cuda_bench $C/bin/
[ -f $B/bench/cuda/tkv_read_bw ] && cp $B/bench/cuda/tkv_read_bw $C/bin/
cp -L /lib/x86_64-linux-gnu/libfmt.so.9 /usr/local/cuda/lib/libcudart.so.13 $C/lib/
cp ../shared/goldens/turboquant_vectors.json $C/shared/goldens/
du -sh $C
