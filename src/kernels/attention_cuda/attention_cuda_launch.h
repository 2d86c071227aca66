// Internal: the launch entry points of the decode .cu files, called by
// attention_cuda.cc after validation. Status-free (nvcc cannot include fmt).
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/attention_cuda/attention_cuda.h"

namespace tkv::kernels::cuda_detail {

struct DecodeLaunch {
  DecodeCudaParams p;
  DecodePlan plan;
  float q_scale = 0.0f;              // softmax_scale * log2(e): scores in the exp2 domain
  float* ws_acc = nullptr;           // [n_seqs, n_heads, n_parts, head_dim] fp32 un-normalised
  float* ws_ml = nullptr;            // [n_seqs, n_heads, n_parts, 2] fp32 (max log2, sum)
  const float* centroids = nullptr;  // [2^v_bits] device (turbo)
  const float* signs = nullptr;      // [head_dim] device (turbo)
  float inv_sqrt = 0.0f;             // 1/sqrt(head_dim) (turbo)
  int* counters = nullptr;  // [n_seqs, n_heads] zero at entry, zero at exit: partitions done per
                            // block row (tensor-core path: its last block merges, no reduce kernel)
};

cudaError_t launch_decode_turbo(const DecodeLaunch& l, cudaStream_t stream);
// Tensor-core path (decode_turbo_mma_cuda.cu); only where decode_uses_tensor_cores(p).
cudaError_t launch_decode_turbo_mma(const DecodeLaunch& l, cudaStream_t stream);
cudaError_t launch_decode_bf16(const DecodeLaunch& l, cudaStream_t stream);
// Merges partials; unrotate: turbo's inverse FWHT before 1/l.
cudaError_t launch_decode_reduce(const DecodeLaunch& l, bool unrotate, cudaStream_t stream);

}  // namespace tkv::kernels::cuda_detail
