// Vector layer of the fused paged attention (internal): the same small set of
// operations at two widths, 8 lanes (AVX2, the build's baseline) in namespace
// fused::avx2 and 16 lanes (AVX-512 F/BW/VL/DQ/VBMI/VNNI, picked at run time) in
// fused::avx512. attention_fused_kernels.inc is written once against these
// names and compiled for each (the int8 Q·K operations: fused_simd_i8.h). Every
// AVX-512 function carries TKV_FUSED_TGT512 so the rest of the program (std
// templates included) stays baseline code.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define TKV_FUSED_TGT2 __attribute__((target("avx2,fma,f16c")))
#define TKV_FUSED_TGT512                                                    \
  __attribute__((                                                           \
      target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi," \
             "avx512vnni")))

namespace tkv::kernels::fused {

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

namespace avx2 {
constexpr int W = 8;
using F = __m256;
using I = __m256i;
TKV_FUSED_TGT2 inline F zero() {
  return _mm256_setzero_ps();
}
TKV_FUSED_TGT2 inline F load(const float* p) {
  return _mm256_loadu_ps(p);
}
TKV_FUSED_TGT2 inline void store(float* p, F v) {
  _mm256_storeu_ps(p, v);
}
TKV_FUSED_TGT2 inline F set1(float x) {
  return _mm256_set1_ps(x);
}
TKV_FUSED_TGT2 inline F bcast(const float* p) {
  return _mm256_broadcast_ss(p);
}
TKV_FUSED_TGT2 inline F add(F a, F b) {
  return _mm256_add_ps(a, b);
}
TKV_FUSED_TGT2 inline F sub(F a, F b) {
  return _mm256_sub_ps(a, b);
}
TKV_FUSED_TGT2 inline F mul(F a, F b) {
  return _mm256_mul_ps(a, b);
}
TKV_FUSED_TGT2 inline F fmadd(F a, F b, F c) {
  return _mm256_fmadd_ps(a, b, c);
}
TKV_FUSED_TGT2 inline F cvt(I v) {
  return _mm256_cvtepi32_ps(v);
}
TKV_FUSED_TGT2 inline float hsum(F v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
TKV_FUSED_TGT2 inline F load_bf16(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
TKV_FUSED_TGT2 inline F load_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// W B-bit values (B in 1..5, LSB-first) starting at byte p; 8 values fill B
// bytes, so chunks are byte aligned. Reads 8 bytes (pools carry a tail pad).
template <int B>
TKV_FUSED_TGT2 inline I unpack(const uint8_t* p) {
  if constexpr (B == 8) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  } else {
    uint64_t x;
    std::memcpy(&x, p, 8);
    constexpr int hb = (4 * B) & ~7;
    const uint32_t lo = static_cast<uint32_t>(x), hi = static_cast<uint32_t>(x >> hb);
    const __m256i w = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(hi)),
                                       _mm_set1_epi32(static_cast<int>(lo)));
    const __m256i sh =
        _mm256_setr_epi32(0, B, 2 * B, 3 * B, 4 * B - hb, 5 * B - hb, 6 * B - hb, 7 * B - hb);
    return _mm256_and_si256(_mm256_srlv_epi32(w, sh), _mm256_set1_epi32((1 << B) - 1));
  }
}
// c[idx] for a 2^B-entry table padded to 256 floats.
template <int B>
TKV_FUSED_TGT2 inline F lut(const float* c, I q) {
  if constexpr (B <= 3) {
    return _mm256_permutevar8x32_ps(_mm256_loadu_ps(c), q);
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
TKV_FUSED_TGT2 inline F roundn(F v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
TKV_FUSED_TGT2 inline F pow2i(F n) {  // 2^n for integral n in [-126, 127]
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
TKV_FUSED_TGT2 inline F zero_below_m87(F x, F v) {  // v where x >= -87 (or NaN), else 0
  return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ), v);
}
TKV_FUSED_TGT2 inline F max(F a, F b) {
  return _mm256_max_ps(a, b);
}
TKV_FUSED_TGT2 inline F fnmadd(F a, F b, F c) {
  return _mm256_fnmadd_ps(a, b, c);
}
// Row sums of W rows of W floats (a: [W][W]): lane t = Σ_j a[t][j]. A transpose-add
// tree, ~2 shuffles + 1 add per row instead of a horizontal sum per row.
TKV_FUSED_TGT2 inline F hsum_rows(const float* a) {
  F b[4];
  for (int i = 0; i < 4; ++i) {
    const F x = load(a + 16 * i), y = load(a + 16 * i + 8);
    b[i] = add(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
  }
  F c[2];
  for (int i = 0; i < 2; ++i)
    c[i] = add(_mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
               _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  const F e = add(_mm256_shuffle_ps(c[0], c[1], 0x88), _mm256_shuffle_ps(c[0], c[1], 0xDD));
  return _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
TKV_FUSED_TGT2 inline float hmax(F v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
}  // namespace avx2

namespace avx512 {
constexpr int W = 16;
using F = __m512;
using I = __m512i;
TKV_FUSED_TGT512 inline F zero() {
  return _mm512_setzero_ps();
}
TKV_FUSED_TGT512 inline F load(const float* p) {
  return _mm512_loadu_ps(p);
}
TKV_FUSED_TGT512 inline void store(float* p, F v) {
  _mm512_storeu_ps(p, v);
}
TKV_FUSED_TGT512 inline F set1(float x) {
  return _mm512_set1_ps(x);
}
TKV_FUSED_TGT512 inline F bcast(const float* p) {
  return _mm512_set1_ps(*p);
}
TKV_FUSED_TGT512 inline F add(F a, F b) {
  return _mm512_add_ps(a, b);
}
TKV_FUSED_TGT512 inline F sub(F a, F b) {
  return _mm512_sub_ps(a, b);
}
TKV_FUSED_TGT512 inline F mul(F a, F b) {
  return _mm512_mul_ps(a, b);
}
TKV_FUSED_TGT512 inline F fmadd(F a, F b, F c) {
  return _mm512_fmadd_ps(a, b, c);
}
TKV_FUSED_TGT512 inline F cvt(I v) {
  return _mm512_cvtepi32_ps(v);
}
TKV_FUSED_TGT512 inline float hsum(F v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}
TKV_FUSED_TGT512 inline F load_bf16(const uint8_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
TKV_FUSED_TGT512 inline F load_f16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 16 B-bit values (2B bytes) at p. B <= 4: one qword holds them all, and
// vpmultishiftqb pulls the byte starting at bit B*j into dword j's low byte.
// B = 5: the two 8-value halves (5 bytes each) go to the two 256-bit halves.
template <int B>
TKV_FUSED_TGT512 inline I unpack(const uint8_t* p) {
  if constexpr (B == 8) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    uint64_t lo, hi = 0;
    std::memcpy(&lo, p, 8);
    if constexpr (B == 5) std::memcpy(&hi, p + 5, 8);
    const __m512i data = B == 5
                             ? _mm512_inserti64x4(_mm512_set1_epi64(static_cast<long long>(lo)),
                                                  _mm256_set1_epi64x(static_cast<long long>(hi)), 1)
                             : _mm512_set1_epi64(static_cast<long long>(lo));
    // Control byte of dword j (qword j/2, byte 4*(j%2)): bit offset of value j in its qword.
    alignas(64) static constexpr uint8_t kCtl[64] = {
#define TKV_C(j) static_cast<uint8_t>(B * ((B == 5) ? (j) % 8 : (j))), 0, 0, 0
        TKV_C(0),  TKV_C(1),  TKV_C(2),  TKV_C(3), TKV_C(4),  TKV_C(5),
        TKV_C(6),  TKV_C(7),  TKV_C(8),  TKV_C(9), TKV_C(10), TKV_C(11),
        TKV_C(12), TKV_C(13), TKV_C(14), TKV_C(15)
#undef TKV_C
    };
    const __m512i sel = _mm512_multishift_epi64_epi8(_mm512_load_si512(kCtl), data);
    return _mm512_and_si512(sel, _mm512_set1_epi32((1 << B) - 1));
  }
}
template <int B>
TKV_FUSED_TGT512 inline F lut(const float* c, I q) {
  if constexpr (B <= 4) {
    return _mm512_permutexvar_ps(q, _mm512_loadu_ps(c));
  } else if constexpr (B == 5) {
    return _mm512_permutex2var_ps(_mm512_loadu_ps(c), q, _mm512_loadu_ps(c + 16));
  } else {
    return _mm512_i32gather_ps(q, c, 4);
  }
}
TKV_FUSED_TGT512 inline F roundn(F v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
TKV_FUSED_TGT512 inline F pow2i(F n) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
TKV_FUSED_TGT512 inline F zero_below_m87(F x, F v) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), v);
}
TKV_FUSED_TGT512 inline F max(F a, F b) {
  return _mm512_max_ps(a, b);
}
TKV_FUSED_TGT512 inline F fnmadd(F a, F b, F c) {
  return _mm512_fnmadd_ps(a, b, c);
}
// Row sums of W rows of W floats (a: [W][W]): lane t = Σ_j a[t][j], by a
// transpose-add tree (halves, quarters, pairs, lanes).
TKV_FUSED_TGT512 inline F hsum_rows(const float* a) {
  F b[8];
  for (int i = 0; i < 8; ++i) {
    const F x = load(a + 32 * i), y = load(a + 32 * i + 16);
    b[i] = add(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
  }
  F c[4];
  for (int i = 0; i < 4; ++i)
    c[i] = add(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
               _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  F e[2];
  for (int i = 0; i < 2; ++i)
    e[i] = add(_mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0x44),
               _mm512_shuffle_ps(c[2 * i], c[2 * i + 1], 0xEE));
  const F r = add(_mm512_shuffle_ps(e[0], e[1], 0x88), _mm512_shuffle_ps(e[0], e[1], 0xDD));
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}
TKV_FUSED_TGT512 inline float hmax(F v) {
  return _mm512_reduce_max_ps(v);
}
}  // namespace avx512

}  // namespace tkv::kernels::fused
