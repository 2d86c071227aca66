// AVX2 building blocks of the fused paged attention (internal to
// attention_fused_cpu.cc): 8-lane unpack of the codec's LSB-first bitstream,
// per-format K/V row decoders (values are the codec's own dequant formulas,
// quant/turbo_k.h, turbo_v.h, affine_kv.h, evaluated 8 lanes at a time), and a
// vector exp. Rows follow quant::kv_row_layout; bf16 rows are [k x D][v x D].
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tkv::kernels::fused {

// Byte offsets of a row's planes, head_dim and the turbo centroids.
struct RowFmt {
  int64_t k_off = 0, v_off = 0, ks_off = 0, kz_off = 0, vs_off = 0, vz_off = 0;
  int head_dim = 0;
  const float* centroids = nullptr;  // [2^v_bits] turbo only
};

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256 load_bf16x8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Eight B-bit values (B in 1..5) starting at byte p (8 values fill exactly B
// bytes, so a chunk is byte aligned). Reads 8 bytes: pools carry a tail pad.
template <int B>
inline __m256i unpack8(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  constexpr int hb = (4 * B) & ~7;
  const uint32_t lo = static_cast<uint32_t>(x), hi = static_cast<uint32_t>(x >> hb);
  const __m256i w = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(hi)), _mm_set1_epi32(static_cast<int>(lo)));
  const __m256i sh = _mm256_setr_epi32(0, B, 2 * B, 3 * B, 4 * B - hb, 5 * B - hb, 6 * B - hb, 7 * B - hb);
  return _mm256_and_si256(_mm256_srlv_epi32(w, sh), _mm256_set1_epi32((1 << B) - 1));
}
template <>
inline __m256i unpack8<8>(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// ---- K decoders: params(row, grp) then chunk(row, e) -> 8 fp32 k̂ values.
struct KBf16 {
  static constexpr int kGroup = 32;
  struct P {};
  static P params(const uint8_t*, int, const RowFmt&) { return {}; }
  static __m256 chunk(const uint8_t* row, int e, const P&, const RowFmt& f) { return load_bf16x8(row + f.k_off + 2 * e); }
};

// TurboQuant K: (idx + zero) * scale, per 32-group (turbo_k_dequant).
template <int B, bool kSigned>
struct KTurbo {
  static constexpr int kGroup = 32;
  struct P {
    __m256 z, s;
  };
  static P params(const uint8_t* row, int g, const RowFmt& f) {
    return {_mm256_set1_ps(h2f(row + f.kz_off + 2 * g)), _mm256_set1_ps(h2f(row + f.ks_off + 2 * g))};
  }
  static __m256 chunk(const uint8_t* row, int e, const P& p, const RowFmt& f) {
    const uint8_t* d = row + f.k_off + e * B / 8;
    __m256i q;
    if constexpr (B == 8 && kSigned) {
      q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d)));
    } else {
      q = unpack8<B>(d);
    }
    return _mm256_mul_ps(_mm256_add_ps(_mm256_cvtepi32_ps(q), p.z), p.s);
  }
};

// Affine K: idx * scale + bias per 64-group (affine_dequant).
template <int B>
struct KAffine {
  static constexpr int kGroup = 64;
  struct P {
    __m256 s, b;
  };
  static P params(const uint8_t* row, int g, const RowFmt& f) {
    return {_mm256_set1_ps(h2f(row + f.ks_off + 2 * g)), _mm256_set1_ps(h2f(row + f.kz_off + 2 * g))};
  }
  static __m256 chunk(const uint8_t* row, int e, const P& p, const RowFmt& f) {
    const __m256 q = _mm256_cvtepi32_ps(unpack8<B>(row + f.k_off + e * B / 8));
    return _mm256_add_ps(_mm256_mul_ps(q, p.s), p.b);
  }
};

// ---- V decoders: value(row, e) is the per-element part; scale(row, g) and
// bias(row, g) the per-group parts: v̂ = value * scale + bias.
struct VBf16 {
  static constexpr int kGroup = 32;
  static constexpr bool kRotated = false, kHasBias = false;
  static float scale(const uint8_t*, int, const RowFmt&) { return 1.0f; }
  static float bias(const uint8_t*, int, const RowFmt&) { return 0.0f; }
  static __m256 value(const uint8_t* row, int e, const RowFmt& f) { return load_bf16x8(row + f.v_off + 2 * e); }
};

// TurboQuant V in the rotated domain: c[idx] * scale (turbo_v_dequant_rotated_row).
template <int B>
struct VTurbo {
  static constexpr int kGroup = 32;
  static constexpr bool kRotated = true, kHasBias = false;
  static float scale(const uint8_t* row, int g, const RowFmt& f) { return h2f(row + f.vs_off + 2 * g); }
  static float bias(const uint8_t*, int, const RowFmt&) { return 0.0f; }
  static __m256 value(const uint8_t* row, int e, const RowFmt& f) {
    const __m256i q = unpack8<B>(row + f.v_off + e * B / 8);
    const float* c = f.centroids;
    if constexpr (B <= 3) {
      return _mm256_permutevar8x32_ps(_mm256_loadu_ps(c), q);  // 2^B <= 8 entries (table padded by caller)
    } else if constexpr (B == 4) {
      const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(c), q);
      const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(c + 8), q);
      return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(q, 28)));
    } else if constexpr (B == 5) {
      const __m256 m3 = _mm256_castsi256_ps(_mm256_slli_epi32(q, 28));
      const __m256 m4 = _mm256_castsi256_ps(_mm256_slli_epi32(q, 27));
      const __m256 a = _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(c), q),
                                        _mm256_permutevar8x32_ps(_mm256_loadu_ps(c + 8), q), m3);
      const __m256 b = _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(c + 16), q),
                                        _mm256_permutevar8x32_ps(_mm256_loadu_ps(c + 24), q), m3);
      return _mm256_blendv_ps(a, b, m4);
    } else {
      return _mm256_i32gather_ps(c, q, 4);
    }
  }
};

// Affine V: idx * scale + bias per 64-group.
template <int B>
struct VAffine {
  static constexpr int kGroup = 64;
  static constexpr bool kRotated = false, kHasBias = true;
  static float scale(const uint8_t* row, int g, const RowFmt& f) { return h2f(row + f.vs_off + 2 * g); }
  static float bias(const uint8_t* row, int g, const RowFmt& f) { return h2f(row + f.vz_off + 2 * g); }
  static __m256 value(const uint8_t* row, int e, const RowFmt& f) {
    return _mm256_cvtepi32_ps(unpack8<B>(row + f.v_off + e * B / 8));
  }
};

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// exp(x) for x <= 0 (softmax weights): Cody–Waite reduction x = n ln2 + r and a
// degree-6 polynomial; relative error < 2e-7 on [-87, 0], exactly 0 below -87.
inline __m256 exp_neg(__m256 x) {
  const __m256 big_neg = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(big_neg, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

}  // namespace tkv::kernels::fused
