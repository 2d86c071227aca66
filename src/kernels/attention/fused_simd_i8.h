// Vector layer of the fused paged attention, int8 Q·K part (internal): loads of
// every quantized key format as integer lanes, the stored int8 query, its integer
// dot and per-lane query sums, and the per-lane fp16 group parameters, for the
// 8-lane AVX2 build (vpmaddwd on int16) and the 16-lane AVX-512 VNNI build
// (vpdpbusd on u8 x s8). Used by attention_fused_kernels.inc beside fused_simd.h.
#pragma once
#include "kernels/attention/fused_simd.h"

namespace tkv::kernels::fused {

namespace avx2 {
// ---- int8 Q·K (quantized keys): integer dots over KC key elements at a time.
// AVX2 has no vpdpbusd and vpmaddubsw saturates its int16 pair sums (255 * 127 * 2
// > 32767), so keys and the int8 query are widened to int16 and vpmaddwd sums
// exact pairs: dword l of a chunk holds elements 2l, 2l+1 (all in one 32-group).
constexpr int KC = 16;
using QT = int16_t;             // stored query element
constexpr int kSignedBias = 0;  // signed keys are sign-extended, no offset
template <bool kSigned>
TKV_FUSED_TGT2 inline I kload(const uint8_t* p, int) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return kSigned ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
}
TKV_FUSED_TGT2 inline I qload(const QT* q) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(q));
}
TKV_FUSED_TGT2 inline I idot(I k, I q) {
  return _mm256_madd_epi16(k, q);
}
TKV_FUSED_TGT2 inline F qsum_lanes(const QT* q) {  // lane l: the query sum under dword l
  return cvt(_mm256_madd_epi16(qload(q), _mm256_set1_epi16(1)));
}
// 4-bit keys: the chunk's 8 bytes as 16 int16, low nibbles (even elements) in
// words 0-7, high nibbles (odd elements) in words 8-15; the query is stored in
// that order (nibble_pos).
TKV_FUSED_TGT2 inline I kload4(const uint8_t* p, int) {
  const __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_set_m128i(_mm_srli_epi16(x, 4), _mm_and_si128(x, _mm_set1_epi16(15)));
}
// 2/3/5-bit keys: the chunk's 16 values as 16 int16 in element order (two 8-value
// unpacks, packed and put back in order; reads up to 8 - B bytes past the chunk's
// 2B, within the row or the pool's tail pad).
template <int B>
TKV_FUSED_TGT2 inline I kloadb(const uint8_t* p, int) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(unpack<B>(p), unpack<B>(p + B)), 0xD8);
}
// fp16 per-group value for each lane of chunk c (n valid elements): one group.
template <int kGroup, bool kNibble = false>
TKV_FUSED_TGT2 inline F group_lanes(const uint8_t* p, int c, int) {
  return set1(h2f(p + 2 * (c * KC / kGroup)));
}
}  // namespace avx2

namespace avx512 {
// ---- int8 Q·K (quantized keys) with VNNI: vpdpbusd sums 4 u8 x s8 products per
// dword, 64 key elements per chunk; dword l holds elements 4l..4l+3, so lanes
// 0-7 are the chunk's first 32-group and 8-15 its second. Signed keys are made
// unsigned by flipping the top bit (k + 128); kSignedBias folds the -128 back in
// through the query sums.
constexpr int KC = 64;
using QT = int8_t;
constexpr int kSignedBias = -128;
template <bool kSigned>
TKV_FUSED_TGT512 inline I kload(const uint8_t* p, int n) {
  const __m512i b = n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((1ull << n) - 1, p);
  return kSigned ? _mm512_xor_si512(b, _mm512_set1_epi8(static_cast<char>(0x80))) : b;
}
TKV_FUSED_TGT512 inline I qload(const QT* q) {
  return _mm512_load_si512(q);
}
TKV_FUSED_TGT512 inline I idot(I k, I q) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), k, q);
}
TKV_FUSED_TGT512 inline F qsum_lanes(const QT* q) {
  return cvt(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), qload(q)));
}
// fp16 per-group value for each lane of chunk c (n valid elements). A half chunk
// (n = 32) spreads its one group over all lanes: the masked lanes are zero and must
// not meet the next plane's bytes (possibly inf/NaN) as a scale.
// 4-bit keys: the chunk's 32 bytes (16 for a half chunk) as 64 bytes, low nibbles
// (even elements) in bytes 0-31, high nibbles (odd elements) in bytes 32-63; the
// query is stored in that order (nibble_pos). Lanes 0-3 and 8-11 are then the
// chunk's first 32-group, 4-7 and 12-15 its second.
TKV_FUSED_TGT512 inline I kload4(const uint8_t* p, int n) {
  const __m256i b = n >= 64 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                            : _mm256_maskz_loadu_epi8((1u << (n / 2)) - 1, p);
  const __m256i m = _mm256_set1_epi8(15);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m)),
                            _mm256_and_si256(_mm256_srli_epi16(b, 4), m), 1);
}
// 2/3/5-bit keys (LSB-first, B bytes per 8 values): the chunk's 64 values as 64
// bytes in element order. vpermb gives qword i the B bytes of values 8i..8i+7 and
// vpmultishiftqb moves value j of each qword (bit B·j) into its byte j; the masked
// load reads only the chunk's n·B/8 bytes.
template <int B>
struct KloadbTables {
  alignas(64) uint8_t idx[64] = {}, ctl[64] = {};
  constexpr KloadbTables() {
    for (int b = 0; b < 64; ++b) {
      idx[b] = static_cast<uint8_t>(B * (b / 8) + (b % 8 < B ? b % 8 : B - 1));
      ctl[b] = static_cast<uint8_t>(B * (b % 8));
    }
  }
};
template <int B>
inline constexpr KloadbTables<B> kKloadb{};
template <int B>
TKV_FUSED_TGT512 inline I kloadb(const uint8_t* p, int n) {
  const __m512i raw = _mm512_maskz_loadu_epi8((1ull << (n * B / 8)) - 1, p);
  const __m512i spread = _mm512_permutexvar_epi8(_mm512_load_si512(kKloadb<B>.idx), raw);
  return _mm512_and_si512(_mm512_multishift_epi64_epi8(_mm512_load_si512(kKloadb<B>.ctl), spread),
                          _mm512_set1_epi8(static_cast<char>((1 << B) - 1)));
}
template <int kGroup, bool kNibble = false>
TKV_FUSED_TGT512 inline F group_lanes(const uint8_t* p, int c, int n) {
  if constexpr (kGroup == 64) {
    return set1(h2f(p + 2 * c));
  } else {
    uint32_t two;
    std::memcpy(&two, p + 4 * c, 4);
    const __m512 v = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(two))));
    const __m512i idx = n < 64 ? _mm512_setzero_si512()
                        : kNibble
                            ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1)
                            : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return _mm512_permutexvar_ps(idx, v);
  }
}
}  // namespace avx512

}  // namespace tkv::kernels::fused
