// Attention over a paged bf16 KV cache (the bf16 scheme and the reference
// path for quantized schemes, which dequantize pages to bf16/fp32 first).
// The cache is a POD view: a pool of pages and one sequence's page list.
// Causal: query i (position q_pos0 + i) sees keys [lo, q_pos0 + i], lo = 0 or
// the sliding-window start (window = number of keys visible incl. itself).
#pragma once
#include <cstdint>

#include "base/thread_pool.h"

namespace tkv::kernels {

struct PagedBf16View {
  const uint16_t* k_pool = nullptr;   // [n_pool_pages, page_size, n_kv_heads, head_dim] bf16
  const uint16_t* v_pool = nullptr;   // same shape
  const int32_t* page_ids = nullptr;  // [ceil(n_kv / page_size)] pool page of each logical page
  int page_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t n_kv = 0;  // valid tokens in the sequence (keys 0..n_kv-1)
};

struct AttnArgs {
  const float* q = nullptr;  // [n_q, n_heads, head_dim]
  float* out = nullptr;      // [n_q, n_heads, head_dim]
  int64_t n_q = 0;
  int n_heads = 0;
  int64_t q_pos0 = 0;  // position of query 0; keys beyond q_pos0 + i are masked
  int64_t window = 0;  // 0 = full attention
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
};

// Same for fp32 K/V in contiguous [n_kv, n_kv_heads, head_dim] (the oracle).
void attention_f32_ref(const float* k, const float* v, int64_t n_kv, int n_kv_heads, int head_dim,
                       const AttnArgs& a);
// Same, scoring key j with q_alt (a.q's shape) where alt[j] != 0 (alt: [n_kv]): the
// reference of a kernel that scores some keys with a transformed query.
void attention_f32_ref(const float* k, const float* v, int64_t n_kv, int n_kv_heads, int head_dim,
                       const AttnArgs& a, const float* q_alt, const uint8_t* alt);
void attention_bf16_cpu(const PagedBf16View& kv, const AttnArgs& a, ThreadPool& pool);

}  // namespace tkv::kernels
