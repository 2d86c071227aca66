// CUDA encode of new tokens' K/V (fp32 rows) into the paged cache (turbo or bf16),
// bit-exact with kvcodec_encode_ref: the same src/quant inline codec per element,
// one block per (token, kv head), K and V halves side by side, one warp per 32-group of
// each (spec §4, write path).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention_cuda/paged_kv.h"

namespace tkv {
class Status;  // base/status.h (not includable from .cu files)
}

namespace tkv::kernels {

struct KvEncodeCudaParams {
  PagedKv cache;  // planes written (page table unused; page_size and n_kv_heads give the rows)
  int n_tokens = 0;
  const float* k = nullptr;               // [n_tokens, n_kv_heads, head_dim] device; null skips K
  const float* v = nullptr;               // [n_tokens, n_kv_heads, head_dim] device; null skips V
  const int32_t* slot_mapping = nullptr;  // [n_tokens] device: page * page_size + offset; < 0 skips
};

// Validates ("[kvcodec_cuda] ...") and launches on stream (asynchronous).
Status kvcodec_encode_cuda(const KvEncodeCudaParams& p, cudaStream_t stream = nullptr);

namespace cuda_detail {
// The raw launch (no validation); signs/boundaries/centroids are device tables, centroids
// null unless the scheme fits its V scales (KvScheme::v_mse_scale).
cudaError_t launch_kv_encode(const KvEncodeCudaParams& p, const float* signs, float inv_sqrt,
                             const float* boundaries, const float* centroids, cudaStream_t stream);
}  // namespace cuda_detail

}  // namespace tkv::kernels
