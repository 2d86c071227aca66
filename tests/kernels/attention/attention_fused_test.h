// Shared helper of the fused-attention and kvcache tests: build paged segments from
// fp32 K/V with the codec (the tolerance is kernels/attention/attention_fused_bound.h).
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
  // is_float: bf16 rows unless scheme says f16.
  const quant::KvScheme sch =
      is_float && !scheme.is_float() ? quant::KvScheme{quant::KvKind::kBf16, 16, 16, d} : scheme;
  const KvPageFormat fmt{sch, nkv, page_size};
  const quant::KvRowLayout lay = fmt.rows();
  const int64_t rb = lay.row_bytes;
  const int64_t n_pages = (n + page_size - 1) / page_size;
  const int64_t n_pool = n_pages + 3;
  s.pool.assign(static_cast<size_t>(n_pool * nkv * page_size * rb + kKvPoolTailPad), 0xA5);
  std::vector<int32_t> perm(static_cast<size_t>(n_pool));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  s.page_ids.assign(perm.begin(), perm.begin() + n_pages);
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
        const bool f16 = sch.kind == quant::KvKind::kF16;
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
  s.view = {fmt, s.pool.data(), s.page_ids.data(), pos0, n};
}

}  // namespace tkv::kernels::testing
