// Turbo V accumulated with int8 dot products (AVX-512 VNNI vpdpbusd), the V half of the
// fused decode attention on AVX-512 (FusedIsa::kAvx512Int8V). The fp32 path
// (attention_fused_kernels.inc, value_block) spends per token and 16 values an unpack,
// a codebook permute and one FMA per query head: 32 multiply-adds per cycle at best.
// Here four tokens share every instruction and vpdpbusd does 64 per cycle:
//  * the codebook is int8 (centroid ≈ q · step, |q| <= 127, step chosen per bit width
//    to fit all centroids best: int8_codebook);
//  * per block of <= 32 tokens, each (32-group, head) weight p · scale is quantized to
//    u8 against the block's largest, w ≈ u · wmax / 255;
//  * the four tokens' codes are looked up (vpermb), interleaved byte-wise so each dword
//    holds one element of the four tokens, and dotted with the heads' four u8 weights;
//  * the int32 sums (at most 32 · 255 · 127 per lane, no overflow) go to the fp32
//    accumulators once per block, times wmax / 255 · step.
// value_block_i8_ref below is the same arithmetic in scalar code (the unit test's
// oracle); the error against exact fp32 is in attention_fused_bound.h.
//
// Lane order: for the 64 values of a part, vector k (k = 0..3) holds in its 128-bit lane
// L the elements 16L + 4k .. 16L + 4k + 3 (four tokens each), so lanes 0-1 are the
// part's first 32-group and lanes 2-3 its second; a 4x4 transpose of 128-bit lanes at the
// end of the block puts the sums back in element order.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/attention/attention_fused_internal.h"
#include "kernels/attention/fused_simd_i8.h"
#include "quant/turbo_tables.h"

#define TKV_VI8_TGT TKV_FUSED_TGT512

namespace tkv::kernels::fused {

bool value_i8_supported(int v_bits, int head_dim) {
  return v_bits >= 1 && v_bits <= 5 && head_dim % 64 == 0 && head_dim <= kMaxDim;
}

Int8Codebook int8_codebook(const float* c, int v_bits, bool signed_half) {
  const int n = 1 << v_bits;
  float cmax = 0;
  for (int i = 0; i < n; ++i) cmax = std::max(cmax, std::fabs(c[i]));
  // step in [cmax / 127, 2 cmax / 127): the squared rounding error summed over the
  // centroids, minimized on a fine grid (the largest always fits in 127 steps).
  Int8Codebook cb;
  double best = INFINITY;
  for (int k = 0; k <= 4096; ++k) {
    const float step = cmax / 127.0f * (1.0f + static_cast<float>(k) / 4096.0f);
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double q = std::rint(c[i] / step);
      err += (q * step - c[i]) * (q * step - c[i]);
    }
    if (err < best) best = err, cb.step = step;
  }
  for (int i = 0; i < 64; ++i) {
    const int8_t q = static_cast<int8_t>(std::rint(c[i % n] / cb.step));  // period 2^v_bits
    cb.q[i] = signed_half && i >= 32 ? static_cast<int8_t>(-q) : q;
  }
  return cb;
}

const Int8Codebook* int8_codebook_for(int v_bits, bool absmax) {
  static const auto books = [] {
    std::vector<Int8Codebook> t(12);  // [absmax][v_bits]
    for (int b = 1; b <= 5; ++b) {
      if (const float* c = quant::turbo_centroids(b))
        t[static_cast<size_t>(b)] = int8_codebook(c, b);
      if (const float* c = quant::turbo_absmax_centroids(b))
        t[static_cast<size_t>(6 + b)] = int8_codebook(c, b, true);
    }
    return t;
  }();
  if (v_bits < 1 || v_bits > 5 || (absmax && !quant::turbo_absmax_centroids(v_bits)))
    return nullptr;
  return &books[static_cast<size_t>((absmax ? 6 : 0) + v_bits)];
}

namespace {

constexpr int kMaxGroups = kMaxDim / 32;
constexpr int kSub = 4;  // query heads per pass: 4 heads x 4 int32 accumulators

// The block's weights: u8 per (group, head, token) and the per (group, head) factor
// wmax / 255 · step that turns the int32 sums back into rotated-domain values. Scalar
// and vector code compute them with the same fp32 operations (value_block_i8_ref
// reproduces them bit for bit).
struct Weights {
  alignas(64) uint8_t u[kMaxGroups][kMaxGroup][kBlock];
  float fac[kMaxGroups][kMaxGroup];
  // Signed V scales: per part (group pair) and token, bit 0 = the first group's scale is
  // negative, bit 1 = the second's (the weights take |scale|).
  uint8_t neg[kMaxGroups / 2][kBlock];
};

inline float weight_inv(float wmax) {
  return wmax > 0 ? 255.0f / wmax : 0.0f;
}

// 64 B-bit codes (LSB-first, 8B bytes at p) as bytes; bits above B are left as they
// fall (the int8 table repeats with period 2^B, so they are never masked off).
template <int B>
TKV_VI8_TGT inline __m512i codes64(const uint8_t* p) {
  const __m512i raw = _mm512_maskz_loadu_epi8((1ull << (8 * B)) - 1, p);
  const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(avx512::kKloadb<B>.idx), raw);
  return _mm512_multishift_epi64_epi8(_mm512_load_si512(avx512::kKloadb<B>.ctl), spread);
}

// The part's 64 int8 values of four tokens, interleaved per element (lane order above).
// Signed: each token's codes are cut to B bits and bit 5 set where its group's scale is
// negative (neg[k]: bit 0 first group, bit 1 second), selecting the table's negated half.
template <int B, bool Signed>
TKV_VI8_TGT inline __m512i token_values(const uint8_t* r, __m512i tbl, int neg) {
  __m512i c = codes64<B>(r);
  if constexpr (Signed) {
    const __m512i sign =
        _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8(static_cast<char>(neg & 1 ? 32 : 0)),
                                _mm512_set1_epi8(static_cast<char>(neg & 2 ? 32 : 0)));
    c = _mm512_ternarylogic_epi32(c, _mm512_set1_epi8((1 << B) - 1), sign, 0xEA);  // a&b | c
  }
  return _mm512_permutexvar_epi8(c, tbl);
}

template <int B, bool Signed>
TKV_VI8_TGT inline void quad_values(const uint8_t* const* r, int64_t off, __m512i tbl,
                                    const uint8_t* neg, __m512i (&x)[4]) {
  const __m512i v0 = token_values<B, Signed>(r[0] + off, tbl, Signed ? neg[0] : 0);
  const __m512i v1 = token_values<B, Signed>(r[1] + off, tbl, Signed ? neg[1] : 0);
  const __m512i v2 = token_values<B, Signed>(r[2] + off, tbl, Signed ? neg[2] : 0);
  const __m512i v3 = token_values<B, Signed>(r[3] + off, tbl, Signed ? neg[3] : 0);
  const __m512i lo01 = _mm512_unpacklo_epi8(v0, v1), hi01 = _mm512_unpackhi_epi8(v0, v1);
  const __m512i lo23 = _mm512_unpacklo_epi8(v2, v3), hi23 = _mm512_unpackhi_epi8(v2, v3);
  x[0] = _mm512_unpacklo_epi16(lo01, lo23);
  x[1] = _mm512_unpackhi_epi16(lo01, lo23);
  x[2] = _mm512_unpacklo_epi16(hi01, hi23);
  x[3] = _mm512_unpackhi_epi16(hi01, hi23);
}

// acc[g][e0 + 0..63] += fac · Σ_quads u(g) · q for NT heads.
template <int B, int NT, bool Signed>
TKV_VI8_TGT void part_pass(const uint8_t* const* rows, int nq, int64_t off, __m512i tbl,
                           const Weights& w, int grp0, int g0, float* const* acc, int e0) {
  __m512i a[NT][4];
  for (int g = 0; g < NT; ++g)
    for (int k = 0; k < 4; ++k) a[g][k] = _mm512_setzero_si512();
  for (int j = 0; j < nq; ++j) {
    __m512i x[4];
    quad_values<B, Signed>(rows + 4 * j, off, tbl, w.neg[grp0 / 2] + 4 * j, x);
    for (int g = 0; g < NT; ++g) {
      uint32_t u0, u1;  // u8 weights of tokens 4j..4j+3 in the part's two groups
      std::memcpy(&u0, &w.u[grp0][g0 + g][4 * j], 4);
      std::memcpy(&u1, &w.u[grp0 + 1][g0 + g][4 * j], 4);
      const __m512i u = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(static_cast<int>(u0)),
                                                _mm512_set1_epi32(static_cast<int>(u1)));
      for (int k = 0; k < 4; ++k) a[g][k] = _mm512_dpbusd_epi32(a[g][k], u, x[k]);
    }
  }
  for (int g = 0; g < NT; ++g) {  // 4x4 transpose of 128-bit lanes, scaled into acc
    const __m512i t0 = _mm512_shuffle_i32x4(a[g][0], a[g][1], 0x44);
    const __m512i t1 = _mm512_shuffle_i32x4(a[g][2], a[g][3], 0x44);
    const __m512i t2 = _mm512_shuffle_i32x4(a[g][0], a[g][1], 0xEE);
    const __m512i t3 = _mm512_shuffle_i32x4(a[g][2], a[g][3], 0xEE);
    const __m512i o[4] = {_mm512_shuffle_i32x4(t0, t1, 0x88), _mm512_shuffle_i32x4(t0, t1, 0xDD),
                          _mm512_shuffle_i32x4(t2, t3, 0x88), _mm512_shuffle_i32x4(t2, t3, 0xDD)};
    float* p = acc[g0 + g] + e0;
    for (int m = 0; m < 4; ++m) {
      const __m512 f = _mm512_set1_ps(w.fac[grp0 + m / 2][g0 + g]);
      _mm512_storeu_ps(p + 16 * m,
                       _mm512_fmadd_ps(_mm512_cvtepi32_ps(o[m]), f, _mm512_loadu_ps(p + 16 * m)));
    }
  }
}

// The V group scales of the block's rows, sc[grp][t] (0 past nb): one 16-lane gather
// per pair of groups and 16 tokens (the fp16 pair split into its low and high halves).
TKV_VI8_TGT void block_scales(const uint8_t* base, int64_t rb, int nb, int n_groups,
                              const RowFmt& f, float (*sc)[kBlock]) {
  for (int h = 0; h < 2; ++h) {
    const __m512i t =
        _mm512_add_epi32(_mm512_set1_epi32(16 * h),
                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __mmask16 live = _mm512_cmplt_epi32_mask(t, _mm512_set1_epi32(nb));
    const __m512i off = _mm512_mullo_epi32(_mm512_min_epi32(t, _mm512_set1_epi32(nb - 1)),
                                           _mm512_set1_epi32(static_cast<int>(rb)));
    for (int grp = 0; grp < n_groups; grp += 2) {
      const __m512i x = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, off,
                                                    base + f.vs_off + 2 * grp, 1);
      _mm512_store_ps(&sc[grp][16 * h], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x)));
      _mm512_store_ps(&sc[grp + 1][16 * h],
                      _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16))));
    }
  }
}

template <bool Signed>
TKV_VI8_TGT void block_weights(const uint8_t* base, int64_t rb, int nb, int nt, int n_groups,
                               const RowFmt& f, const float (*p)[kBlock], Weights& w) {
  alignas(64) float sc[kMaxGroups][kBlock];
  block_scales(base, rb, nb, n_groups, f, sc);
  if constexpr (Signed) {  // |scale| into the weights, the signs into neg (rows past nb: 0)
    for (int grp = 0; grp < n_groups; grp += 2)
      for (int t = 0; t < kBlock; ++t) {
        const int n0 = sc[grp][t] < 0.0f, n1 = sc[grp + 1][t] < 0.0f;
        w.neg[grp / 2][t] = static_cast<uint8_t>(n0 | (n1 << 1));
        sc[grp][t] = std::fabs(sc[grp][t]), sc[grp + 1][t] = std::fabs(sc[grp + 1][t]);
      }
  }
  // p is written to a multiple of 16 tokens (pad lanes 0): read no further
  const int nv = (nb + 15) / 16;
  alignas(64) float wmax[kMaxGroups * kMaxGroup];
  for (int grp = 0; grp < n_groups; ++grp)
    for (int g = 0; g < nt; ++g) {
      __m512 mx = _mm512_mul_ps(_mm512_loadu_ps(&p[g][0]), _mm512_load_ps(&sc[grp][0]));
      if (nv > 1)
        mx = _mm512_max_ps(mx,
                           _mm512_mul_ps(_mm512_loadu_ps(&p[g][16]), _mm512_load_ps(&sc[grp][16])));
      wmax[grp * nt + g] = _mm512_reduce_max_ps(mx);
    }
  for (int c = 0; c < n_groups * nt; ++c) {
    const float inv = weight_inv(wmax[c]);
    const int grp = c / nt, g = c % nt;
    w.fac[grp][g] = wmax[c] / 255.0f * f.v_i8_step;
    for (int i = 0; i < 2; ++i) {
      const __m512i q =
          i < nv ? _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(&p[g][16 * i]),
                                                                  _mm512_load_ps(&sc[grp][16 * i])),
                                                    _mm512_set1_ps(inv)))
                 : _mm512_setzero_si512();
      _mm_store_si128(reinterpret_cast<__m128i*>(&w.u[grp][g][16 * i]), _mm512_cvtusepi32_epi8(q));
    }
  }
}

template <int B, bool Signed>
TKV_VI8_TGT void value_i8(const uint8_t* base, int64_t rb, int nb, int nt, const RowFmt& f,
                          const float (*p)[kBlock], float* const* acc) {
  const int d = f.head_dim, nq = (nb + 3) / 4;
  // Rows of the block's quads; a partial last quad repeats the last row (weight 0), so
  // nothing past the block is read.
  const uint8_t* rows[kBlock];
  for (int t = 0; t < kBlock; ++t) rows[t] = base + std::min(t, nb - 1) * rb;
  Weights w;
  block_weights<Signed>(base, rb, nb, nt, d / 32, f, p, w);
  const __m512i tbl = _mm512_loadu_si512(f.v_i8);
  const int n_sub = (nt + kSub - 1) / kSub, per = (nt + n_sub - 1) / n_sub;
  for (int part = 0; part < d / 64; ++part) {
    const int64_t off = f.v_off + part * 8 * B;
    for (int g0 = 0; g0 < nt; g0 += per) {
      const int n = std::min(per, nt - g0);
      switch (n) {
        // clang-format off
        case 1: part_pass<B, 1, Signed>(rows, nq, off, tbl, w, 2 * part, g0, acc, 64 * part); break;
        case 2: part_pass<B, 2, Signed>(rows, nq, off, tbl, w, 2 * part, g0, acc, 64 * part); break;
        case 3: part_pass<B, 3, Signed>(rows, nq, off, tbl, w, 2 * part, g0, acc, 64 * part); break;
        case 4: part_pass<B, 4, Signed>(rows, nq, off, tbl, w, 2 * part, g0, acc, 64 * part); break;
        default: TKV_CHECK(false);
          // clang-format on
      }
    }
  }
}

}  // namespace

void value_block_i8(int v_bits, const uint8_t* base, int64_t rb, int nb, int nt, const RowFmt& f,
                    const float (*p)[kBlock], float* const* acc) {
  if (f.v_signed_scales) {
    switch (v_bits) {
      // clang-format off
      case 2: return value_i8<2, true>(base, rb, nb, nt, f, p, acc);
      case 3: return value_i8<3, true>(base, rb, nb, nt, f, p, acc);
      case 4: return value_i8<4, true>(base, rb, nb, nt, f, p, acc);
      case 5: return value_i8<5, true>(base, rb, nb, nt, f, p, acc);
      default: TKV_CHECK(false);
        // clang-format on
    }
  }
  switch (v_bits) {
    // clang-format off
    case 1: return value_i8<1, false>(base, rb, nb, nt, f, p, acc);
    case 2: return value_i8<2, false>(base, rb, nb, nt, f, p, acc);
    case 3: return value_i8<3, false>(base, rb, nb, nt, f, p, acc);
    case 4: return value_i8<4, false>(base, rb, nb, nt, f, p, acc);
    case 5: return value_i8<5, false>(base, rb, nb, nt, f, p, acc);
    default: TKV_CHECK(false);
      // clang-format on
  }
}

void value_block_i8_ref(int v_bits, const uint8_t* base, int64_t rb, int nb, int nt,
                        const RowFmt& f, const float (*p)[kBlock], float* const* acc) {
  const int d = f.head_dim;
  for (int grp = 0; grp < d / 32; ++grp)
    for (int g = 0; g < nt; ++g) {
      float w[kBlock], wmax = 0;
      bool neg[kBlock] = {};
      for (int t = 0; t < nb; ++t) {
        const float sc = h2f(base + t * rb + f.vs_off + 2 * grp);
        neg[t] = f.v_signed_scales && sc < 0.0f;
        w[t] = p[g][t] * (neg[t] ? -sc : sc);
        wmax = std::max(wmax, w[t]);
      }
      const float inv = weight_inv(wmax), fac = wmax / 255.0f * f.v_i8_step;
      int32_t sum[32] = {};
      for (int t = 0; t < nb; ++t) {
        const int u = static_cast<int>(std::min(255.0f, std::nearbyint(w[t] * inv)));
        const uint8_t* codes = base + t * rb + f.v_off;
        for (int e = 0; e < 32; ++e) {
          const int i = grp * 32 + e, bit = i * v_bits;
          uint32_t x = 0;
          std::memcpy(&x, codes + bit / 8, std::min(4, (v_bits + 7 + bit % 8) / 8 + 1));
          sum[e] += u * f.v_i8[((x >> (bit % 8)) & ((1u << v_bits) - 1)) | (neg[t] ? 32u : 0u)];
        }
      }
      for (int e = 0; e < 32; ++e)
        acc[g][grp * 32 + e] = std::fma(static_cast<float>(sum[e]), fac, acc[g][grp * 32 + e]);
    }
}

}  // namespace tkv::kernels::fused
