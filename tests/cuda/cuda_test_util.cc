// Implementation of cuda_test_util.h.
#include "tests/cuda/cuda_test_util.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace tkv::testing {

std::string format_name(const quant::KvScheme& f) {
  std::string n;  // built by appends: g++ 12 warns (-Wrestrict) on "lit" + std::string&&
  if (f.is_float()) {
    n = "bf16";
  } else {
    n.append("k").append(std::to_string(f.k_bits));
    if (f.k_bits == 8 && !f.k_signed()) n.append("u");
    n.append("v").append(std::to_string(f.v_bits));
  }
  return n.append("/d").append(std::to_string(f.head_dim));
}

HostPagedCache make_paged_cache(const quant::KvScheme& f, int n_kv_heads, int page_size,
                                const std::vector<int32_t>& seq_lens, std::mt19937& rng) {
  HostPagedCache c;
  c.format = f;
  c.n_kv_heads = n_kv_heads;
  c.page_size = page_size;
  c.seq_lens = seq_lens;
  c.page_indptr.push_back(0);
  for (int32_t len : seq_lens)
    c.page_indptr.push_back(c.page_indptr.back() + (len + page_size - 1) / page_size);
  c.n_pages = c.page_indptr.back() + 3;  // a few pages no sequence uses
  std::vector<int32_t> perm(c.n_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.page_indices.assign(perm.begin(), perm.begin() + c.page_indptr.back());
  const int64_t rows = c.n_rows();
  c.k_data.assign(rows * quant::kv_row_layout_of(f).k_data_bytes, 0);
  c.v_data.assign(rows * quant::kv_row_layout_of(f).v_data_bytes, 0);
  if (!f.is_float()) {
    c.k_scale.assign(rows * (f.head_dim / quant::kTurboGroup), 0);
    c.k_zero.assign(rows * (f.head_dim / quant::kTurboGroup), 0);
    c.v_scale.assign(rows * (f.head_dim / quant::kTurboGroup), 0);
  }
  return c;
}

std::vector<int32_t> block_table(const HostPagedCache& h, int extra, int32_t pad) {
  const size_t n = h.seq_lens.size();
  int max_pages = 0;
  for (size_t s = 0; s < n; ++s)
    max_pages = std::max(max_pages, h.page_indptr[s + 1] - h.page_indptr[s]);
  const int stride = max_pages + extra;
  std::vector<int32_t> t(n * stride, pad);
  for (size_t s = 0; s < n; ++s)
    std::copy(h.page_indices.begin() + h.page_indptr[s],
              h.page_indices.begin() + h.page_indptr[s + 1], t.begin() + s * stride);
  return t;
}

void DevicePagedCache::upload(const HostPagedCache& h) {
  k_data.upload(h.k_data);
  v_data.upload(h.v_data);
  k_scale.upload(h.k_scale);
  k_zero.upload(h.k_zero);
  v_scale.upload(h.v_scale);
  page_indptr.upload(h.page_indptr);
  page_indices.upload(h.page_indices);
  seq_lens.upload(h.seq_lens);
}

kernels::PagedKv DevicePagedCache::view(const HostPagedCache& h) const {
  kernels::PagedKv v;
  v.format = {h.format, h.n_kv_heads, h.page_size};
  v.k_data = k_data.get();
  v.v_data = v_data.get();
  v.k_scale = k_scale.get();
  v.k_zero = k_zero.get();
  v.v_scale = v_scale.get();
  v.page_indptr = page_indptr.get();
  v.page_indices = page_indices.get();
  v.seq_lens = seq_lens.get();
  return v;
}

}  // namespace tkv::testing
