// Vector layer of the fused paged attention, int8 Q·K part (internal): loads of
// every quantized key format as integer lanes, the stored int8 query, its integer
// dot and per-lane query sums, and the per-lane fp16 group parameters, for the
// 8-lane AVX2 build (vpmaddwd on int16) and the 16-lane AVX-512 VNNI build
// (vpdpbusd on u8 x s8). Used by attention_fused_kernels.inc beside fused_simd.h.
#pragma once
#include "kernels/attention/attention_fused_internal.h"
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
// Token-in-lanes scoring (AVX-512 only, below): not built for AVX2; these declarations
// only let the shared inner loop name it.
constexpr bool kTokenLanes = false;
struct KTile {
  I k[16];
  F s[2], b[2];
};
inline void gather_f16_pair(const uint8_t*, I, F*, F*) {}
inline I izero() {
  return I{};
}
inline I idot_bcast(I acc, I, int32_t) {
  return acc;
}
template <class KD>
inline void token_lanes_tile(const uint8_t*, int64_t, int, int, const RowFmt&, int, KTile&) {}
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
// ---- Token-in-lanes scoring: 16 keys at a time, each 64-byte key chunk transposed so
// that dword j of every key sits in one vector (lane t = key t), dotted with dword j of
// the query broadcast; the per-group sums then meet the keys' fp16 group scale and
// offset as vectors over the 16 keys, so no per-key lane reduction is needed.
constexpr bool kTokenLanes = true;

TKV_FUSED_TGT512 inline I izero() {
  return _mm512_setzero_si512();
}
// acc + the dword dots of k (u8) with the query dword qd (4 x s8) in every lane.
TKV_FUSED_TGT512 inline I idot_bcast(I acc, I k, int32_t qd) {
  return _mm512_dpbusd_epi32(acc, k, _mm512_set1_epi32(qd));
}

// In-place transpose of 16 rows of 16 dwords: afterwards r[j] lane t = old r[t] dword j.
TKV_FUSED_TGT512 inline void transpose16(I (&r)[16]) {
  I t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int a = 0; a < 4; ++a) {  // u[4a + i] lane L: rows 4a..4a+3, dword 4L + i
    u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
    u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
    u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    const I v0 = _mm512_shuffle_i32x4(u[i], u[4 + i], 0x88);  // dwords i, 8+i of rows 0-7
    const I w0 = _mm512_shuffle_i32x4(u[i], u[4 + i], 0xDD);  // dwords 4+i, 12+i
    const I v1 = _mm512_shuffle_i32x4(u[8 + i], u[12 + i], 0x88);
    const I w1 = _mm512_shuffle_i32x4(u[8 + i], u[12 + i], 0xDD);
    r[i] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[8 + i] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
    r[4 + i] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[12 + i] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
  }
}

// One chunk of 16 keys, transposed, with the fp16 parameters of its two 32-groups (a
// 64-group: the same in both) as vectors over the keys: scale s and offset b.
struct KTile {
  I k[16];
  F s[2], b[2];
};

// The fp16 pair at byte offset off of 16 rows (byte offsets rows, base p) as two
// vectors: the low halves (first value) and the high halves (second).
TKV_FUSED_TGT512 inline void gather_f16_pair(const uint8_t* p, I rows, F* lo, F* hi) {
  const I x = _mm512_i32gather_epi32(rows, p, 1);
  *lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x));
  *hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
}

// Keys t0..t0+15 of the block (rows past nb repeat row nb - 1), chunk c.
template <class KD>
TKV_FUSED_TGT512 inline void token_lanes_tile(const uint8_t* base, int64_t rb, int t0, int nb,
                                              const RowFmt& f, int c, KTile& kt) {
  const I t = _mm512_min_epi32(
      _mm512_add_epi32(_mm512_set1_epi32(t0),
                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)),
      _mm512_set1_epi32(nb - 1));
  const I rows = _mm512_mullo_epi32(t, _mm512_set1_epi32(static_cast<int>(rb)));
  alignas(64) int32_t ro[16];
  _mm512_store_si512(ro, rows);
  for (int i = 0; i < 16; ++i) kt.k[i] = KD::load(base + ro[i], c, KC, f);
  transpose16(kt.k);
  KD::tile_params(base, rows, c, f, kt.s, kt.b);
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
