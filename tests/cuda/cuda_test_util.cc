// Implementation of cuda_test_util.h.
#include "tests/cuda/cuda_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/kvcodec/kvcodec.h"
#include "quant/ggml_blocks.h"
#include "quant/half.h"

namespace tkv::testing {

std::vector<uint8_t> random_ggml_weights(ggml::Type t, int64_t n_in, int64_t n_out,
                                         std::mt19937& rng) {
  const size_t bytes = ggml::row_bytes(t, n_in) * (size_t)n_out;
  std::vector<uint8_t> w(bytes);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  if (t == ggml::Type::kF32 || t == ggml::Type::kF16 || t == ggml::Type::kBF16) {
    for (size_t i = 0, n = bytes / (t == ggml::Type::kF32 ? 4 : 2); i < n; ++i) {
      const float v = u(rng);
      const uint16_t h = t == ggml::Type::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      if (t == ggml::Type::kF32)
        std::memcpy(&w[4 * i], &v, 4);
      else
        std::memcpy(&w[2 * i], &h, 2);
    }
    return w;
  }
  for (auto& b : w) b = (uint8_t)rng();
  std::vector<size_t> offs = {0};
  if (t == ggml::Type::kQ4_1 || t == ggml::Type::kQ4_K || t == ggml::Type::kQ5_K) offs.push_back(2);
  if (t == ggml::Type::kQ6_K) offs = {offsetof(ggml::BlockQ6_K, d)};
  const size_t bb = ggml::traits(t).block_bytes;
  for (size_t b = 0; b < bytes; b += bb)
    for (size_t o : offs) {
      const float v = std::ldexp(0.5f + 0.5f * std::fabs(u(rng)), -5 - (int)(rng() % 4));
      const uint16_t h = f32_to_f16(u(rng) < 0 ? -v : v);
      std::memcpy(&w[b + o], &h, 2);
    }
  return w;
}

void fill_paged_cache(HostPagedCache& h, const std::vector<int32_t>& lens, std::mt19937& rng,
                      std::normal_distribution<float>& n01, std::vector<float>* k_hat,
                      std::vector<float>* v_hat) {
  const quant::KvScheme& f = h.format;
  const int d = f.head_dim;
  const int64_t rows = h.n_rows();
  std::vector<float> k((size_t)rows * d), v(k.size()), chan(d);
  for (float& x : chan) x = 0.5f * n01(rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < d; ++i) k[r * d + i] = n01(rng) + chan[i], v[r * d + i] = n01(rng);
  const quant::KvRowLayout rl = quant::kv_row_layout(f);
  const kernels::KvPlanes planes =
      kernels::kv_planes_separate(rl, h.k_data.data(), h.v_data.data(), h.k_scale.data(),
                                  h.k_zero.data(), h.v_scale.data(), nullptr);
  kernels::KvEncodeParams ep;
  ep.scheme = f;
  ep.n_rows = rows;
  ep.k = k.data();
  ep.v = v.data();
  ep.out = planes;
  kernels::kvcodec_encode_ref(ep);
  k_hat->resize(k.size());
  v_hat->resize(v.size());
  kernels::KvDequantParams dp;
  dp.scheme = f;
  dp.n_rows = rows;
  dp.in = planes;
  dp.k = k_hat->data();
  dp.v = v_hat->data();
  kernels::kvcodec_dequant_ref(dp);
  for (size_t s = 0; s < lens.size(); ++s) {
    const int page_end = (lens[s] + h.page_size - 1) / h.page_size * h.page_size;
    for (int t = lens[s]; t < page_end; ++t)
      for (int kvh = 0; kvh < h.n_kv_heads; ++kvh) {
        const int64_t row = h.row((int)s, t, kvh);
        std::fill_n(h.k_data.begin() + row * rl.k_data_bytes, rl.k_data_bytes, 0xff);  // NaN
        std::fill_n(h.v_data.begin() + row * rl.v_data_bytes, rl.v_data_bytes, 0xff);
        if (!f.is_float())
          for (auto* plane : {&h.k_scale, &h.k_zero, &h.v_scale})
            std::fill_n(plane->begin() + row * (d / quant::kTurboGroup), d / quant::kTurboGroup,
                        (uint16_t)0x7e00);  // fp16 NaN
      }
  }
}

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
