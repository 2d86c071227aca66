// PagedKv: POD view of a paged KV cache in device memory, shared by the CUDA
// encode (kvcodec_cuda) and decode-attention kernels, in the one page format
// (kernels/attention/kv_page.h) with each plane in its own array. Page table is
// CSR per sequence as in FlashInfer; every plane is head-major inside a page
// ("HND"): [n_pages, n_kv_heads, page_size, bytes], rows indexed by paged_row.
// No CUDA or base headers here: .cu files include it (see docs/cuda-kernels.md).
#pragma once
#include <cstdint>

#include "kernels/attention/kv_page.h"  // KvPageFormat, paged_row

namespace tkv::kernels {

struct PagedKv {
  // scheme bf16 or turbo; page_size a power of two. Plane row bytes: format.rows()
  // (k_data_bytes, v_data_bytes; the fp16 planes hold head_dim / 32 values per row).
  KvPageFormat format;
  uint8_t* k_data = nullptr;    // [n_pages, n_kv_heads, page_size, rows().k_data_bytes]
  uint8_t* v_data = nullptr;    // [n_pages, n_kv_heads, page_size, rows().v_data_bytes]
  uint16_t* k_scale = nullptr;  // [n_pages, n_kv_heads, page_size, head_dim/32] fp16 (turbo)
  uint16_t* k_zero = nullptr;   // [n_pages, n_kv_heads, page_size, head_dim/32] fp16 (turbo)
  uint16_t* v_scale = nullptr;  // [n_pages, n_kv_heads, page_size, head_dim/32] fp16 (turbo)
  const int32_t* page_indptr =
      nullptr;  // [n_seqs + 1] into page_indices (unused with page_stride > 0)
  const int32_t* page_indices =
      nullptr;  // [page_indptr[n_seqs]] page of each seq's j-th page_size tokens
  const int32_t* seq_lens = nullptr;  // [n_seqs] tokens in the cache per sequence
  // 0: page_indices is CSR over page_indptr. > 0: page_indices is a block table
  // [n_seqs, page_stride] (row s: sequence s's pages, entries past its length unused), so a
  // kernel finds a sequence's pages without first reading page_indptr (one DRAM trip less
  // before its first cache load). page_stride * page_size >= every seq_len.
  int page_stride = 0;

  // Sequence seq's pages (CSR: reads page_indptr[seq]).
  TKV_HD const int32_t* seq_pages(int seq) const {
    return page_indices +
           (page_stride > 0 ? (int64_t)seq * page_stride : (int64_t)page_indptr[seq]);
  }
};

}  // namespace tkv::kernels
