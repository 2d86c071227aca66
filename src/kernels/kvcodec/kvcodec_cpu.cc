// SIMD + multi-threaded KV codec (AVX-512 or AVX2, chosen at run time), bit-identical
// to kvcodec_ref.cc. The per-ISA primitives live here; the shared body is
// kvcodec_simd.inc, compiled twice (AVX-512 code under #pragma GCC target, the
// baseline is x86-64-v3). Rows (token × kv-head) are split across the thread pool.
// GCC 12's AVX-512 headers build results from _mm512_undefined_*(), which -Wuninitialized
// flags at the header line once inlined (GCC bug 105593); silence it for this TU only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/affine_kv.h"
#include "quant/turbo_tables.h"
#include "quant/turbo_v.h"

namespace tkv::kernels {
namespace {

template <typename T>
T* row_ptr(const KvPlane& p, int64_t r) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(p.data) + r * p.row_stride_bytes);
}

namespace avx2 {
constexpr int W = 8;
using VF = __m256;
using VI = __m256i;
inline VF vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void vstore(float* p, VF v) {
  _mm256_storeu_ps(p, v);
}
inline VF vset1(float f) {
  return _mm256_set1_ps(f);
}
inline VF vadd(VF a, VF b) {
  return _mm256_add_ps(a, b);
}
inline VF vsub(VF a, VF b) {
  return _mm256_sub_ps(a, b);
}
inline VF vmul(VF a, VF b) {  // opaque product: never contracted into an FMA (see quant::mul_rn)
  VF p = _mm256_mul_ps(a, b);
  __asm__("" : "+x"(p));
  return p;
}
inline VF vdiv(VF a, VF b) {
  return _mm256_div_ps(a, b);
}
inline VF vmin(VF a, VF b) {
  return _mm256_min_ps(a, b);
}
inline VF vmax(VF a, VF b) {
  return _mm256_max_ps(a, b);
}
inline VF vround_f16(VF x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
inline VF vrint(VF x) {
  return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline VF vsanitize(VF x) {
  x = _mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_ORD_Q));  // NaN -> +0
  x = _mm256_min_ps(_mm256_max_ps(x, vset1(-quant::kF16Max)), vset1(quant::kF16Max));
  return _mm256_add_ps(x, _mm256_setzero_ps());  // -0 -> +0
}
inline float hmin(VF v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)));
}
inline float hmax(VF v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
// v[i] + v[i + 4], then + 2, + 1: quant::turbo_v_fit_sum's order on its last 8 terms.
inline float hsum_halves(VF v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}
inline VF vcvt_i2f(VI v) {
  return _mm256_cvtepi32_ps(v);
}
inline VI vcvt_f2i(VF v) {
  return _mm256_cvttps_epi32(v);
}
inline VI vset1_i(int v) {
  return _mm256_set1_epi32(v);
}
inline VI vadd_i(VI a, VI b) {
  return _mm256_add_epi32(a, b);
}
inline VI vand_si(VI a, VI b) {
  return _mm256_and_si256(a, b);
}
inline VI vload_si(const void* p) {
  return _mm256_load_si256(static_cast<const __m256i*>(p));
}
inline VI vload_u8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline VI vload_i8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
template <int N>
inline VI vbroadcast_bytes(const uint8_t* p) {
  uint64_t w = 0;
  std::memcpy(&w, p, N);
  return _mm256_set1_epi64x((long long)w);
}
inline VI vshuffle_bytes(VI v, VI ctl) {
  return _mm256_shuffle_epi8(v, ctl);
}
inline VI vsrlv(VI v, VI s) {
  return _mm256_srlv_epi32(v, s);
}
inline VI vcount_gt(VI acc, VF a, float b) {
  return _mm256_sub_epi32(acc,
                          _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(b), _CMP_GT_OQ)));
}
inline VF vgather(const float* base, VI idx) {
  return _mm256_i32gather_ps(base, idx, 4);
}
inline VI vselect_gt(VF a, VF b, VI t, VI f) {
  return _mm256_blendv_epi8(f, t, _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ)));
}
inline void store_idx_u8(uint8_t* dst, VI v) {  // low byte of each lane
  const VI ctl = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4,
                                  8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, ctl),
                                  _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(v));
}
template <int B>
inline VF vlut(const float* lut, VI idx) {
  if constexpr (B <= 3) {
    return _mm256_permutevar8x32_ps(_mm256_load_ps(lut), idx);
  } else if constexpr (B == 4) {
    const VF lo = _mm256_permutevar8x32_ps(_mm256_load_ps(lut), idx);
    const VF hi = _mm256_permutevar8x32_ps(_mm256_load_ps(lut + 8), idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  } else {
    return _mm256_i32gather_ps(lut, idx, 4);
  }
}
inline VF vfwht_in_register(VF x) {
  VF t = _mm256_permute_ps(x, 0xB1);
  x = _mm256_blend_ps(_mm256_add_ps(x, t), _mm256_sub_ps(t, x), 0xAA);
  t = _mm256_permute_ps(x, 0x4E);
  x = _mm256_blend_ps(_mm256_add_ps(x, t), _mm256_sub_ps(t, x), 0xCC);
  t = _mm256_permute2f128_ps(x, x, 0x01);
  return _mm256_blend_ps(_mm256_add_ps(x, t), _mm256_sub_ps(t, x), 0xF0);
}
#include "kernels/kvcodec/kvcodec_simd.inc"
}  // namespace avx2

// clang ignores #pragma GCC target; its equivalent is a target attribute on
// every function of the block (the clang ASan/UBSan and fuzz builds).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#endif
namespace avx512 {
constexpr int W = 16;
using VF = __m512;
using VI = __m512i;
inline VF vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void vstore(float* p, VF v) {
  _mm512_storeu_ps(p, v);
}
inline VF vset1(float f) {
  return _mm512_set1_ps(f);
}
inline VF vadd(VF a, VF b) {
  return _mm512_add_ps(a, b);
}
inline VF vsub(VF a, VF b) {
  return _mm512_sub_ps(a, b);
}
inline VF vmul(VF a, VF b) {
  VF p = _mm512_mul_ps(a, b);
  __asm__("" : "+v"(p));
  return p;
}
inline VF vdiv(VF a, VF b) {
  return _mm512_div_ps(a, b);
}
inline VF vmin(VF a, VF b) {
  return _mm512_min_ps(a, b);
}
inline VF vmax(VF a, VF b) {
  return _mm512_max_ps(a, b);
}
inline VF vround_f16(VF x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
inline VF vrint(VF x) {
  return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline VF vsanitize(VF x) {
  x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x);  // NaN -> +0
  x = _mm512_min_ps(_mm512_max_ps(x, vset1(-quant::kF16Max)), vset1(quant::kF16Max));
  return _mm512_add_ps(x, _mm512_setzero_ps());  // -0 -> +0
}
inline float hmin(VF v) {
  return _mm512_reduce_min_ps(v);
}
inline float hmax(VF v) {
  return _mm512_reduce_max_ps(v);
}
// v[i] + v[i + 8], then + 4, + 2, + 1: quant::turbo_v_fit_sum's order on its last 16 terms.
inline float hsum_halves(VF v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}
inline VF vcvt_i2f(VI v) {
  return _mm512_cvtepi32_ps(v);
}
inline VI vcvt_f2i(VF v) {
  return _mm512_cvttps_epi32(v);
}
inline VI vset1_i(int v) {
  return _mm512_set1_epi32(v);
}
inline VI vadd_i(VI a, VI b) {
  return _mm512_add_epi32(a, b);
}
inline VI vand_si(VI a, VI b) {
  return _mm512_and_si512(a, b);
}
inline VI vload_si(const void* p) {
  return _mm512_load_si512(p);
}
inline VI vload_u8(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VI vload_i8(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
template <int N>
inline VI vbroadcast_bytes(
    const uint8_t* p) {  // masked load: never reads past p + N, no stack round trip
  return _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8((__mmask16)((1u << N) - 1u), p));
}
inline VI vshuffle_bytes(VI v, VI ctl) {
  return _mm512_shuffle_epi8(v, ctl);
}
inline VI vsrlv(VI v, VI s) {
  return _mm512_srlv_epi32(v, s);
}
inline VI vcount_gt(VI acc, VF a, float b) {
  return _mm512_mask_add_epi32(acc, _mm512_cmp_ps_mask(a, _mm512_set1_ps(b), _CMP_GT_OQ), acc,
                               _mm512_set1_epi32(1));
}
inline VF vgather(const float* base, VI idx) {
  return _mm512_i32gather_ps(idx, base, 4);
}
inline VI vselect_gt(VF a, VF b, VI t, VI f) {
  return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), f, t);
}
inline void store_idx_u8(uint8_t* dst, VI v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(v));
}
template <int B>
inline VF vlut(const float* lut, VI idx) {
  if constexpr (B <= 4) {
    return _mm512_permutexvar_ps(idx, _mm512_load_ps(lut));
  } else if constexpr (B == 5) {
    return _mm512_permutex2var_ps(_mm512_load_ps(lut), idx, _mm512_load_ps(lut + 16));
  } else {
    return _mm512_i32gather_ps(idx, lut, 4);
  }
}
inline VF vfwht_in_register(VF x) {
  VF t = _mm512_permute_ps(x, 0xB1);
  x = _mm512_mask_blend_ps(0xAAAA, _mm512_add_ps(x, t), _mm512_sub_ps(t, x));
  t = _mm512_permute_ps(x, 0x4E);
  x = _mm512_mask_blend_ps(0xCCCC, _mm512_add_ps(x, t), _mm512_sub_ps(t, x));
  t = _mm512_shuffle_f32x4(x, x, 0xB1);
  x = _mm512_mask_blend_ps(0xF0F0, _mm512_add_ps(x, t), _mm512_sub_ps(t, x));
  t = _mm512_shuffle_f32x4(x, x, 0x4E);
  return _mm512_mask_blend_ps(0xFF00, _mm512_add_ps(x, t), _mm512_sub_ps(t, x));
}
#include "kernels/kvcodec/kvcodec_simd.inc"
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
bool g_use_avx512 = has_avx512();

// Per-call constant tables: centroids padded to 256 lanes, inv_sqrt*sign.
struct VTables {
  alignas(64) float lut[256] = {};
  alignas(64) float sign_scaled[512] = {};
  VTables(const quant::KvScheme& s) {
    if (s.kind != quant::KvKind::kTurbo) return;
    std::memcpy(lut, quant::turbo_value_centroids(s), sizeof(float) * (1u << s.v_bits));
    for (int i = 0; i < s.head_dim; ++i)
      sign_scaled[i] =
          quant::mul_rn(quant::turbo_inv_sqrt(s.head_dim), quant::turbo_signs(s.head_dim)[i]);
  }
};

// Runs fn(r0, r1) over [0, n_rows), threaded when the work is large enough.
template <typename Fn>
void for_rows(int64_t n_rows, int head_dim, ThreadPool* pool, const Fn& fn) {
  if (!pool) pool = &ThreadPool::global();
  constexpr int64_t kMinElemsPerThread =
      16384;  // below this, waking threads costs more than it saves
  if (pool->n_threads() <= 1 || n_rows * head_dim < 2 * kMinElemsPerThread) {
    fn(int64_t{0}, n_rows);
    return;
  }
  pool->parallel_for(n_rows, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace

void kvcodec_encode_cpu(const KvEncodeParams& p, ThreadPool* pool) {
  TKV_CHECK(quant::validate_kv_scheme(p.scheme).ok());
  if (p.scheme.kind == quant::KvKind::kBf16 || p.scheme.kind == quant::KvKind::kF16)
    return kvcodec_encode_ref(p);
  // The padded centroids only for a fitted V scale (the plain encode needs no tables here).
  std::optional<VTables> t;
  if (p.scheme.v_mse_scale || p.scheme.v_absmax) t.emplace(p.scheme);
  const float* fit_lut = t ? t->lut : nullptr;
  for_rows(p.n_rows, p.scheme.head_dim, pool, [&](int64_t b, int64_t e) {
    if (g_use_avx512)
      avx512::encode_rows(p, b, e, fit_lut);
    else
      avx2::encode_rows(p, b, e, fit_lut);
  });
}

void kvcodec_dequant_cpu(const KvDequantParams& p, ThreadPool* pool) {
  TKV_CHECK(quant::validate_kv_scheme(p.scheme).ok());
  if (p.scheme.kind == quant::KvKind::kBf16 || p.scheme.kind == quant::KvKind::kF16)
    return kvcodec_dequant_ref(p);
  const VTables t(p.scheme);
  const float* sign_scaled = p.v_rotated ? nullptr : t.sign_scaled;
  for_rows(p.n_rows, p.scheme.head_dim, pool, [&](int64_t b, int64_t e) {
    if (g_use_avx512)
      avx512::dequant_rows(p, b, e, t.lut, sign_scaled);
    else
      avx2::dequant_rows(p, b, e, t.lut, sign_scaled);
  });
}

void turbo_v_unrotate_cpu(float* x, int64_t n_rows, int head_dim, ThreadPool* pool) {
  TKV_CHECK(quant::turbo_signs(head_dim) != nullptr);
  const VTables t(quant::KvScheme{quant::KvKind::kTurbo, 8, 3, head_dim});
  for_rows(n_rows, head_dim, pool, [&](int64_t b, int64_t e) {
    if (g_use_avx512)
      avx512::unrotate_rows(x, head_dim, b, e, t.sign_scaled);
    else
      avx2::unrotate_rows(x, head_dim, b, e, t.sign_scaled);
  });
}

bool kvcodec_cpu_set_isa(KvCpuIsa isa) {
  if (isa == KvCpuIsa::kAvx512 && !has_avx512()) return false;
  g_use_avx512 = isa == KvCpuIsa::kAuto ? has_avx512() : isa == KvCpuIsa::kAvx512;
  return true;
}

const char* kvcodec_cpu_isa_name() {
  return g_use_avx512 ? "avx512" : "avx2";
}

}  // namespace tkv::kernels
