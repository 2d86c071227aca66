// Activation quantizers (fp32 -> Q8 blocks), AVX2. Rounding follows what
// llama.cpp runs on x86: quantize_row_q8_0/q8_1 AVX2 path (id = 127/amax,
// round-to-nearest-even, d and s stored as fp16) and quantize_row_q8_K_ref
// (iscale = -127/max with the signed max, nearest_int, d = 1/iscale in fp32).
#include "kernels/matmul/act_quant.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "quant/half.h"

namespace tkv::kernels {
namespace {

inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 32 int32 in four vectors (element order) -> 32 int8 in element order.
inline __m256i pack_i32_to_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
  const __m256i a = _mm256_packs_epi32(i0, i1);  // lanes interleave per 128-bit half
  const __m256i b = _mm256_packs_epi32(i2, i3);
  const __m256i c = _mm256_packs_epi16(a, b);
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_row_q8_32(const float* x, int64_t n_in, bool fp16_sum, int8_t* qs, float* d,
                        float* s) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_in / 32; ++b, x += 32, qs += 32) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
    }
    const float max_scalar = hmax_ps(amax);
    const float dv = max_scalar / 127.f;
    const float id = max_scalar != 0.0f ? 127.f / max_scalar : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_cvtps_epi32(
          _mm256_round_ps(_mm256_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const int sum =
        hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    d[b] = round_f16(dv);
    // Q8_1 keeps ggml's fp16(d_f32 * sum); for Q8_0 the product of the fp16 d and an
    // integer |sum| <= 4064 is exact in fp32 (11 + 12 significant bits).
    s[b] = fp16_sum ? round_f16(dv * static_cast<float>(sum)) : d[b] * static_cast<float>(sum);
  }
}

void quantize_row_q8_k(const float* x, int64_t n_in, int8_t* qs, float* d, int16_t* bsums) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n_in / 256; ++b, x += 256, qs += 256, bsums += 16) {
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k)
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + 8 * k)));
    const float a = hmax_ps(amax);
    if (a == 0.0f) {
      d[b] = 0.0f;
      std::fill(qs, qs + 256, int8_t{0});
      std::fill(bsums, bsums + 16, int16_t{0});
      continue;
    }
    int j = 0;  // first element of largest magnitude: its sign fixes the sign of d (ggml)
    while (std::fabs(x[j]) != a) ++j;
    const float iscale = -127.f / x[j];
    const __m256 vis = _mm256_set1_ps(iscale);
    const __m256i max127 = _mm256_set1_epi32(127);
    for (int g = 0; g < 8; ++g) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), vis);
        q[k] = _mm256_min_epi32(max127, _mm256_cvtps_epi32(_mm256_round_ps(
                                            p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
      }
      bsums[2 * g] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
      bsums[2 * g + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * g),
                          pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
    d[b] = 1.0f / iscale;
  }
}

ActQ8& ActBuffer::reserve(ActKind kind, int64_t n_tokens, int64_t n_in) {
  const int64_t bs = kind == ActKind::kQ8_K ? 256 : 32;
  TKV_CHECK(n_in % bs == 0);
  const int64_t nb = n_in / bs;
  auto up = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  const int64_t qs_bytes = up(n_tokens * n_in), f_bytes = up(n_tokens * nb * 4);
  const int64_t bsum_bytes = kind == ActKind::kQ8_K ? up(n_tokens * (n_in / 16) * 2) : 0;
  const int64_t total = qs_bytes + 2 * f_bytes + bsum_bytes + 64;
  if (static_cast<int64_t>(bytes_.size()) < total) bytes_.resize(static_cast<size_t>(total));
  uint8_t* p = bytes_.data();
  p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;  // 64-byte aligned rows of blocks
  view_ = ActQ8{kind,
                n_tokens,
                n_in,
                nb,
                reinterpret_cast<int8_t*>(p),
                reinterpret_cast<float*>(p + qs_bytes),
                reinterpret_cast<float*>(p + qs_bytes + f_bytes),
                reinterpret_cast<int16_t*>(p + qs_bytes + 2 * f_bytes)};
  return view_;
}

const ActQ8& quantize_act(ActKind kind, const float* x, int64_t n_tokens, int64_t n_in,
                          ActBuffer& buf, ThreadPool* pool) {
  ActQ8& a = buf.reserve(kind, n_tokens, n_in);
  auto run = [&](int, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (kind == ActKind::kQ8_K) {
        quantize_row_q8_k(x + t * n_in, n_in, a.qs + t * n_in, a.d + t * a.n_blocks,
                          a.bsums + t * (n_in / 16));
      } else {
        quantize_row_q8_32(x + t * n_in, n_in, kind == ActKind::kQ8_1, a.qs + t * n_in,
                           a.d + t * a.n_blocks, a.s + t * a.n_blocks);
      }
    }
  };
  if (pool != nullptr && n_tokens > 1 && pool->n_threads() > 1) {
    pool->parallel_for_dynamic(n_tokens, 4, run);
  } else {
    run(0, 0, n_tokens);
  }
  return a;
}

}  // namespace tkv::kernels
