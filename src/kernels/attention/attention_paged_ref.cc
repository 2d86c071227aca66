// Reference attention over paged (bf16 / affine / TurboQuant) segments: every
// row is dequantized with the codec's scalar oracle (kvcodec_dequant_ref, V
// un-rotated eagerly per row) into contiguous fp32 K/V, then attention_f32_ref
// (with the fused kernel's int8 query on quantized keys under RefQuery::kAsFused).
// Slow on purpose: it is the oracle for the fused kernel and the fallback path.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/half.h"

namespace tkv::kernels {

namespace {

// Dequantizes one segment into k/v at [pos, n_kv_heads, head_dim] for its positions.
void dequant_segment(const KvSegmentView& s, float* k, float* v) {
  const int d = s.format.head_dim();
  const quant::KvRowLayout lay = s.format.rows();
  const int64_t rb = lay.row_bytes;
  for (int64_t t = 0; t < s.n_kv; ++t) {
    const int32_t page = s.page_ids[t / s.format.page_size];
    for (int h = 0; h < s.format.n_kv_heads; ++h) {
      float* ko = k + ((s.pos0 + t) * s.format.n_kv_heads + h) * d;
      float* vo = v + ((s.pos0 + t) * s.format.n_kv_heads + h) * d;
      if (page < 0) {  // released (outside every window that can still look at it)
        for (int e = 0; e < d; ++e) ko[e] = vo[e] = 0.0f;
        continue;
      }
      const uint8_t* row =
          s.pool + ((int64_t{page} * s.format.n_kv_heads + h) * s.format.page_size +
                    t % s.format.page_size) *
                       rb;
      if (s.format.is_float()) {
        const auto* r16 = reinterpret_cast<const uint16_t*>(row);
        const bool f16 = s.format.scheme.kind == quant::KvKind::kF16;
        for (int e = 0; e < d; ++e) {
          ko[e] = f16 ? f16_to_f32(r16[e]) : bf16_to_f32(r16[e]);
          vo[e] = f16 ? f16_to_f32(r16[d + e]) : bf16_to_f32(r16[d + e]);
        }
        continue;
      }
      KvDequantParams p;
      p.scheme = s.format.scheme;
      p.n_rows = 1;
      p.in = kv_planes_interleaved(const_cast<uint8_t*>(row), lay);
      p.k = ko;
      p.v = vo;
      kvcodec_dequant_ref(p);
    }
  }
}

}  // namespace

void kv_segments_dequant(const KvSegmentView* segs, int n_segs, float* k, float* v) {
  TKV_CHECK(n_segs >= 1);
  const int d = segs[0].format.head_dim(), nkv = segs[0].format.n_kv_heads;
  int64_t expect = 0;
  for (int i = 0; i < n_segs; ++i) {
    TKV_CHECK(segs[i].pos0 == expect && segs[i].format.head_dim() == d &&
              segs[i].format.n_kv_heads == nkv);
    expect += segs[i].n_kv;
    dequant_segment(segs[i], k, v);
  }
}

void attention_paged_ref(const KvSegmentView* segs, int n_segs, const AttnArgs& a, RefQuery rq) {
  TKV_CHECK(n_segs >= 1);
  const KvSegmentView& last = segs[n_segs - 1];
  const int64_t n_total = last.pos0 + last.n_kv;
  const int d = segs[0].format.head_dim(), nkv = segs[0].format.n_kv_heads;
  std::vector<float> k(static_cast<size_t>(n_total * nkv * d)), v(k.size());
  kv_segments_dequant(segs, n_segs, k.data(), v.data());
  // kAsFused: keys of int8-query segments are scored with the fused kernel's int8 query.
  std::vector<uint8_t> alt;
  std::vector<float> q8;
  if (rq == RefQuery::kAsFused) {
    alt.assign(static_cast<size_t>(n_total), 0);
    for (int i = 0; i < n_segs; ++i)
      if (fused_int8_query(segs[i]))
        std::fill(alt.begin() + segs[i].pos0, alt.begin() + segs[i].pos0 + segs[i].n_kv, 1);
    q8.resize(static_cast<size_t>(a.n_q * a.n_heads * d));
    fused_int8_query_rows(a.q, a.n_q * a.n_heads, d, q8.data());
  }
  attention_f32_ref(k.data(), v.data(), n_total, nkv, d, a, q8.empty() ? nullptr : q8.data(),
                    alt.empty() ? nullptr : alt.data());
}

}  // namespace tkv::kernels
