// The one description of a paged KV cache's pages, shared by the CPU kernels
// (attention_paged_*), the CUDA kernels (PagedKv, attention_cuda/paged_kv.h) and
// the cache that hands them out. A page holds page_size tokens of every kv head,
// head-major ("HND"): row (page * n_kv_heads + kv_head) * page_size + offset
// (paged_row), so one kv head's consecutive tokens are contiguous. A row is the
// scheme's KvRowLayout: host pools interleave its planes in one row of row_bytes
// (KvSegmentView), device pools keep each plane apart (PagedKv); bf16/f16 rows are
// [K x head_dim][V x head_dim]. No base/ headers, C++17: .cu files include it.
#pragma once
#include <cstdint>

#include "quant/kv_format.h"

namespace tkv::kernels {

struct KvPageFormat {
  quant::KvScheme scheme;  // bf16/f16 rows (any head_dim % 8 == 0), affine or turbo
  int n_kv_heads = 0;
  int page_size = 0;  // tokens per page

  TKV_HD int head_dim() const { return scheme.head_dim; }
  TKV_HD bool is_float() const { return scheme.is_float(); }
  TKV_HD quant::KvRowLayout rows() const { return quant::kv_row_layout_of(scheme); }
};

// Row of (page, kv head, offset in the page) in every plane.
TKV_HD int64_t paged_row(int64_t page, int n_kv_heads, int kv_head, int page_size, int offset) {
  return (page * n_kv_heads + kv_head) * page_size + offset;
}

// One segment of a sequence in a host pool of interleaved rows: positions
// [pos0, pos0 + n_kv) of one layer (a sequence may be a bf16 prefix from
// --kv-quant-start, then the quantized rest).
struct KvSegmentView {
  KvPageFormat format;
  const uint8_t* pool = nullptr;  // [n_pool_pages, n_kv_heads, page_size, row_bytes] (+16 B pad)
  const int32_t* page_ids = nullptr;  // [ceil(n_kv / page_size)] pool page (-1 = released)
  int64_t pos0 = 0;                   // sequence position of the segment's first token
  int64_t n_kv = 0;                   // tokens in the segment
};

// What a cache hands out for one (layer, sequence): its segments in position
// order, covering [0, n_total). Attention reads it; it never picks the kernel
// (ops::attention does).
constexpr int kMaxKvSegments = 2;
struct KvView {
  KvSegmentView segs[kMaxKvSegments];
  int n_segs = 0;
  int64_t n_total() const { return n_segs > 0 ? segs[n_segs - 1].pos0 + segs[n_segs - 1].n_kv : 0; }
};

}  // namespace tkv::kernels
