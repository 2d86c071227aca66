// Paged bf16 attention on the CPU: one task per (query token, kv head); the
// query heads of a GQA group share every K/V row load. Online softmax over
// blocks of keys (flash style), fp32 accumulation, AVX2 bf16->fp32 widening.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/attention/attention.h"

namespace tkv::kernels {
namespace {

constexpr int kBlock = 32;  // keys per online-softmax step
constexpr int kMaxGroup = 16;

inline __m256 load_bf16x8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// One query token, one kv head, `group` query heads.
void attend_group(const PagedBf16View& kv, const AttnArgs& a, int64_t i, int kh, int group) {
  const int d = kv.head_dim;
  const int64_t pos = a.q_pos0 + i;
  const int64_t hi = std::min(pos, kv.n_kv - 1);
  const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
  float m[kMaxGroup], l[kMaxGroup];
  alignas(32) float acc[kMaxGroup][512];
  alignas(32) float s[kMaxGroup][kBlock];
  const float* q[kMaxGroup];
  for (int g = 0; g < group; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    std::fill(acc[g], acc[g] + d, 0.0f);
    q[g] = a.q + (i * a.n_heads + kh * group + g) * d;
  }
  const size_t row = static_cast<size_t>(kv.n_kv_heads) * d;
  for (int64_t j0 = lo; j0 <= hi; j0 += kBlock) {
    const int nb = static_cast<int>(std::min<int64_t>(kBlock, hi - j0 + 1));
    const uint16_t* krow[kBlock];
    const uint16_t* vrow[kBlock];
    for (int b = 0; b < nb; ++b) {
      const int64_t j = j0 + b;
      const size_t page = static_cast<size_t>(kv.page_ids[j / kv.page_size]);
      const size_t off = (page * kv.page_size + static_cast<size_t>(j % kv.page_size)) * row +
                         static_cast<size_t>(kh) * d;
      krow[b] = kv.k_pool + off;
      vrow[b] = kv.v_pool + off;
    }
    for (int b = 0; b < nb; ++b) {
      __m256 dot[kMaxGroup];
      for (int g = 0; g < group; ++g) dot[g] = _mm256_setzero_ps();
      for (int e = 0; e < d; e += 8) {
        const __m256 kk = load_bf16x8(krow[b] + e);
        for (int g = 0; g < group; ++g)
          dot[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + e), kk, dot[g]);
      }
      for (int g = 0; g < group; ++g) s[g][b] = hsum(dot[g]) * a.scale;
    }
    for (int g = 0; g < group; ++g) {
      float mb = m[g];
      for (int b = 0; b < nb; ++b) mb = std::max(mb, s[g][b]);
      const float corr = std::exp(m[g] - mb);
      l[g] *= corr;
      for (int e = 0; e < d; ++e) acc[g][e] *= corr;
      for (int b = 0; b < nb; ++b) {
        s[g][b] = std::exp(s[g][b] - mb);
        l[g] += s[g][b];
      }
      m[g] = mb;
    }
    for (int b = 0; b < nb; ++b) {
      for (int e = 0; e < d; e += 8) {
        const __m256 vv = load_bf16x8(vrow[b] + e);
        for (int g = 0; g < group; ++g) {
          __m256 ac = _mm256_load_ps(acc[g] + e);
          _mm256_store_ps(acc[g] + e, _mm256_fmadd_ps(_mm256_set1_ps(s[g][b]), vv, ac));
        }
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    float* o = a.out + (i * a.n_heads + kh * group + g) * d;
    const float inv = l[g] > 0 ? 1.0f / l[g] : 0.0f;
    for (int e = 0; e < d; ++e) o[e] = acc[g][e] * inv;
  }
}

}  // namespace

void attention_bf16_cpu(const PagedBf16View& kv, const AttnArgs& a, ThreadPool& pool) {
  const int group = a.n_heads / kv.n_kv_heads;
  TKV_CHECK(group >= 1 && group <= kMaxGroup && kv.head_dim <= 512 && kv.head_dim % 8 == 0);
  const int64_t n_tasks = a.n_q * kv.n_kv_heads;
  pool.parallel_for(n_tasks, [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t i = t / kv.n_kv_heads;
      const int kh = static_cast<int>(t % kv.n_kv_heads);
      attend_group(kv, a, i, kh, group);
    }
  });
}

}  // namespace tkv::kernels
