// Expected contents of a quantized cache's sequence for the kvcache tests: the
// rows written, their codec round trip (bf16 below --kv-quant-start, the scheme
// from there), and the cache's segments rebuilt from them with the same codec.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "../kernels/attention/attention_fused_test.h"
#include "quant/kv_scheme.h"

namespace tkv::kv::testing {

// Expected contents of one sequence per position: the rows written (raw_k/v) and
// their dequantized K/V, [n_tokens, n_kv_heads, head_dim].
struct Expect {
  std::vector<float> raw_k, raw_v, k, v;
  void trim(int64_t n_tokens, size_t row) {
    for (auto* x : {&raw_k, &raw_v, &k, &v}) x->resize(static_cast<size_t>(n_tokens) * row);
  }
};

// The cache's segments rebuilt from the written rows with the codec (bf16 below
// quant_start, the scheme from there): the bound's inputs and the as-fused reference.
inline std::vector<kernels::testing::SegStore> expected_segments(const std::string& scheme,
                                                                 int64_t quant_start, int d,
                                                                 int nkv, const Expect& ex) {
  const quant::KvScheme s = quant::parse_kv_scheme(scheme, d).value();
  const bool is_float = s.kind == quant::KvKind::kBf16 || s.kind == quant::KvKind::kF16;
  const int64_t n = static_cast<int64_t>(ex.raw_k.size()) / (int64_t{nkv} * d);
  const int64_t qs = is_float ? 0 : std::min(quant_start, n);
  std::vector<kernels::testing::SegStore> segs(qs > 0 && n > qs ? 2 : 1);
  if (qs > 0)
    kernels::testing::build_segment(segs[0], true, {}, d, nkv, 16, 0, qs, ex.raw_k.data(),
                                    ex.raw_v.data(), 1);
  if (n > qs)
    kernels::testing::build_segment(segs.back(), is_float, s, d, nkv, 16, qs, n - qs,
                                    ex.raw_k.data(), ex.raw_v.data(), 2);
  return segs;
}

// What the cache should store for rows of positions [pos0, pos0+n).
inline void expected_rows(const std::string& scheme, int64_t quant_start, int d, int nkv,
                          int64_t pos0, int64_t n, const float* k, const float* v, Expect* ex) {
  const size_t row = static_cast<size_t>(nkv) * d;
  ex->k.resize(static_cast<size_t>(pos0 + n) * row);
  ex->v.resize(ex->k.size());
  ex->raw_k.resize(ex->k.size());
  ex->raw_v.resize(ex->k.size());
  std::copy(k, k + n * row, ex->raw_k.begin() + static_cast<std::ptrdiff_t>(pos0 * row));
  std::copy(v, v + n * row, ex->raw_v.begin() + static_cast<std::ptrdiff_t>(pos0 * row));
  for (int64_t t = 0; t < n; ++t) {
    float* ko = ex->k.data() + static_cast<size_t>(pos0 + t) * row;
    float* vo = ex->v.data() + static_cast<size_t>(pos0 + t) * row;
    if (scheme == "f16") {
      for (size_t e = 0; e < row; ++e)
        ko[e] = f16_to_f32(quant::f16_kv_encode(k[t * row + e])),
        vo[e] = f16_to_f32(quant::f16_kv_encode(v[t * row + e]));
      continue;
    }
    if (scheme == "bf16" || pos0 + t < quant_start) {
      for (size_t e = 0; e < row; ++e)
        ko[e] = bf16_to_f32(f32_to_bf16(k[t * row + e])),
        vo[e] = bf16_to_f32(f32_to_bf16(v[t * row + e]));
      continue;
    }
    const quant::KvScheme s = quant::parse_kv_scheme(scheme, d).value();
    const quant::KvRowLayout lay = quant::kv_row_layout(s);
    std::vector<uint8_t> buf(static_cast<size_t>(lay.row_bytes * nkv));
    kernels::KvEncodeParams ep;
    ep.scheme = s;
    ep.n_rows = nkv;
    ep.k = k + t * row;
    ep.v = v + t * row;
    ep.out = kernels::kv_planes_interleaved(buf.data(), lay);
    kernels::kvcodec_encode_ref(ep);
    kernels::KvDequantParams dp;
    dp.scheme = s;
    dp.n_rows = nkv;
    dp.in = ep.out;
    dp.k = ko;
    dp.v = vo;
    kernels::kvcodec_dequant_ref(dp);
  }
}

}  // namespace tkv::kv::testing
