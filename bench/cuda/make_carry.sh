#!/usr/bin/env bash
# Copies the locally built CUDA test/bench binaries, the shared libraries the GPU
# image lacks (fmt, cudart) and the goldens into build/h-cuda-carry for `run`.
set -e
B=${1:-build/h-cuda}
C=build/h-cuda-carry
rm -rf $C && mkdir -p $C/bin $C/lib $C/shared/goldens
cp $B/tests/cuda/kvcodec_cuda_test $B/tests/cuda/attention_cuda_test $B/bench/cuda/tkv_cuda_bench $C/bin/
cp -L /lib/x86_64-linux-gnu/libfmt.so.9 /usr/local/cuda/lib/libcudart.so.13 $C/lib/
cp ../shared/goldens/turboquant_vectors.json $C/shared/goldens/
du -sh $C
