// Shared helpers of the fused-attention tests: build paged segments from fp32
// K/V with the codec, and the derived fp32 tolerance of fused vs reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/half.h"
#include "quant/kv_math.h"

namespace tkv::kernels::testing {

// One segment's storage: a shuffled page pool, so paging is exercised.
struct SegStore {
  std::vector<uint8_t> pool;
  std::vector<int32_t> page_ids;
  KvSegmentView view;
};

// Encodes k/v rows [pos0, pos0 + n) of [n_total, n_kv_heads, d] into a segment.
inline void build_segment(SegStore& s, bool is_float, const quant::KvScheme& scheme, int d, int nkv,
                          int page_size, int64_t pos0, int64_t n, const float* k, const float* v,
                          uint32_t seed) {
  const int64_t rb = kv_segment_row_bytes(is_float, scheme, d);
  const int64_t n_pages = (n + page_size - 1) / page_size;
  const int64_t n_pool = n_pages + 3;
  s.pool.assign(static_cast<size_t>(n_pool * nkv * page_size * rb + kKvPoolTailPad), 0xA5);
  std::vector<int32_t> perm(static_cast<size_t>(n_pool));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  s.page_ids.assign(perm.begin(), perm.begin() + n_pages);
  const quant::KvRowLayout lay = is_float ? quant::KvRowLayout{} : quant::kv_row_layout(scheme);
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < nkv; ++h) {
      uint8_t* row =
          s.pool.data() +
          ((int64_t{s.page_ids[static_cast<size_t>(t / page_size)]} * nkv + h) * page_size +
           t % page_size) *
              rb;
      const float* kr = k + ((pos0 + t) * nkv + h) * d;
      const float* vr = v + ((pos0 + t) * nkv + h) * d;
      if (is_float) {
        auto* r16 = reinterpret_cast<uint16_t*>(row);
        const bool f16 = scheme.kind == quant::KvKind::kF16;
        for (int e = 0; e < d; ++e) {
          r16[e] = f16 ? quant::f16_kv_encode(kr[e]) : f32_to_bf16(kr[e]);
          r16[d + e] = f16 ? quant::f16_kv_encode(vr[e]) : f32_to_bf16(vr[e]);
        }
        continue;
      }
      KvEncodeParams p;
      p.scheme = scheme;
      p.n_rows = 1;
      p.k = kr;
      p.v = vr;
      p.out = kv_planes_interleaved(row, lay);
      kvcodec_encode_ref(p);
    }
  }
  s.view = {is_float, scheme, d, nkv, page_size, s.pool.data(), s.page_ids.data(), pos0, n};
}

// Derived bound on |fused - reference| for one attention call. Both see the same
// dequantized K/V; they differ by fp32 summation order (scores: d terms; outputs:
// n_kv terms plus one rescale per block), the exp polynomial (< 4 ulp) and, for
// turbo, one deferred fp32 FWHT (log2 d stages) instead of one per row. With the
// house rule for reductions (sqrt(K) u |a||b|, u = 2^-24, factor 2 margin):
//   |δs| <= 2 sqrt(d) u Σ|q k|, and softmax moves o by <= 2 |δs| Vmax;
//   V sums: 2 sqrt(n_kv) u Vmax + 8 u Vmax (exp, rescales);
//   FWHT: 2 sqrt(log2 d) u sqrt(d) Rmax (each stage adds u on |acc| <= sqrt(d) Rmax).
//
// 8-bit keys (turbo k8/k8u, affine 8) take the int8 query (q ≈ qs·qq, qs = max|q|/127,
// rint): each element errs by <= qs/2, so a score moves by
//   |δs_q| <= scale · (qs/2) · Σ_e |k̂_e|               (q8_ds_max, per head and key);
// its fp32 evaluation Σ_groups (s·dot + b·Σqq) sums terms of magnitude
//   <= scale · qs · 127 · Σ_e (255 |s_g| + |b_g| + 128 |s_g|)   (q8_mag_max),
// adding 2 sqrt(d) u of that. Scores all moving by <= ε move the softmax weights
// by Σ|δp| <= e^{2ε} - 1, hence the output by <= expm1(2ε) · Vmax.
struct TolInputs {
  double qk_abs_max = 0;  // max over (query head, key) of scale * Σ_e |q_e k_e|
  double v_max = 0;       // max |v̂| (original domain)
  double r_max = 0;       // max |ṽ| (turbo rotated domain), 0 otherwise
  double q8_ds_max = 0;   // int8 query: max over (head, key) of scale * qs/2 * Σ_e |k̂_e|
  double q8_mag_max = 0;  // int8 query: max magnitude of the fp32 group sums (above)
};
inline double fused_tolerance(const TolInputs& t, int d, int64_t n_kv) {
  const double u = std::ldexp(1.0, -24);
  const double sd = std::sqrt(static_cast<double>(d));
  const double eps_q8 = t.q8_ds_max + 2.0 * sd * u * t.q8_mag_max;
  return std::expm1(2.0 * eps_q8) * t.v_max + 4.0 * sd * u * t.qk_abs_max * t.v_max +
         (2.0 * std::sqrt(static_cast<double>(n_kv)) + 8) * u * t.v_max +
         2.0 * std::sqrt(std::log2(static_cast<double>(d))) * u * sd * t.r_max + 1e-30;
}

}  // namespace tkv::kernels::testing
