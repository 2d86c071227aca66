// PagedKv: POD view of a paged KV cache in device memory, shared by the CUDA
// encode (kvcodec_cuda) and decode-attention kernels. Page table is CSR per
// sequence as in FlashInfer; every plane is head-major inside a page ("HND"):
// [n_pages, n_kv_heads, page_size, bytes], i.e. dense rows indexed by
// (page * n_kv_heads + kv_head) * page_size + offset (paged_row), so the tokens of
// one kv head in one page are contiguous in every plane (as the CPU PagedKvCache).
// No CUDA or base headers here: .cu files include it (see docs/cuda-kernels.md).
#pragma once
#include <cstdint>

#include "quant/half.h"  // TKV_HD only

namespace tkv::kernels {

// Format of the cache (mirrors quant::KvScheme for kBf16 and kTurbo, as plain ints).
struct PagedKvFormat {
  bool bf16 = false;     // true: K/V rows are bf16 [head_dim]; scale planes unused
  int k_bits = 8;        // turbo: 2|3|4|5|8
  int v_bits = 3;        // turbo: 1|2|3|4|5|8
  bool k_signed = true;  // turbo k_bits 8: int8 [-127,127] (else unsigned)
  int head_dim = 128;    // 64|128|256|512

  TKV_HD int k_row_bytes() const { return bf16 ? head_dim * 2 : head_dim * k_bits / 8; }
  TKV_HD int v_row_bytes() const { return bf16 ? head_dim * 2 : head_dim * v_bits / 8; }
  TKV_HD int n_groups() const { return head_dim / 32; }
  // Bytes of one (token, kv head) across all planes (turbo: + 3 fp16 per 32-group).
  TKV_HD int row_bytes() const {
    return k_row_bytes() + v_row_bytes() + (bf16 ? 0 : 6 * n_groups());
  }
};

// Row of (page, kv head, offset in the page) in every plane.
TKV_HD int64_t paged_row(int64_t page, int n_kv_heads, int kv_head, int page_size, int offset) {
  return (page * n_kv_heads + kv_head) * page_size + offset;
}

struct PagedKv {
  PagedKvFormat format;
  int n_kv_heads = 0;
  int page_size = 16;           // tokens per page, a power of two
  uint8_t* k_data = nullptr;    // [n_pages, n_kv_heads, page_size, k_row_bytes]
  uint8_t* v_data = nullptr;    // [n_pages, n_kv_heads, page_size, v_row_bytes]
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
