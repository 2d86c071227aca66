// The derived bound of attention_fused_bound.h: measures its inputs on one call
// (stored K/V dequantized with the codec's oracle, the int8 path's fp16 group
// offsets read from the rows) and evaluates it.
#include "kernels/attention/attention_fused_bound.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/attention/attention_fused_internal.h"
#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/half.h"

namespace tkv::kernels {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Per stored row of a quantized segment: w[e] = |k̂_e - b_g| + |b_g| into w
// [n_total, n_kv_heads, head_dim] (b_g the int8 path's group offset: turbo zero·s, or
// (zero - 128)·s once AVX-512 flips signed keys to unsigned; affine the bias), and
// max |ṽ| of turbo rows into r_max, and per key (int8 V dot formats) the largest V group
// scale and the centroids' L1 (vs, cl1: [n_total, n_kv_heads]).
void quantized_rows(const KvSegmentView& s, const float* k, float* w, double* r_max, double* vs,
                    double* cl1) {
  const int d = s.format.head_dim();
  const quant::KvRowLayout lay = quant::kv_row_layout(s.format.scheme);
  const bool turbo = s.format.scheme.kind == quant::KvKind::kTurbo;
  const int n_groups = static_cast<int>(lay.k_scale_bytes / 2), grp = d / n_groups;
  std::vector<float> rot(static_cast<size_t>(d));
  for (int64_t t = 0; t < s.n_kv; ++t) {
    const int32_t page = s.page_ids[t / s.format.page_size];
    if (page < 0) continue;
    for (int h = 0; h < s.format.n_kv_heads; ++h) {
      const uint8_t* row =
          s.pool + ((int64_t{page} * s.format.n_kv_heads + h) * s.format.page_size +
                    t % s.format.page_size) *
                       lay.row_bytes;
      const int64_t at = ((s.pos0 + t) * s.format.n_kv_heads + h) * d;
      for (int g = 0; g < n_groups; ++g) {
        const double sc = f16_at(row + lay.k_scale_offset + 2 * g);
        const double z = s.format.scheme.k_symmetric ? s.format.scheme.k_zero_implied()
                                                     : f16_at(row + lay.k_zero_offset + 2 * g);
        const double b0 = turbo ? z * sc : z, b1 = s.format.scheme.k_signed() ? (z - 128) * sc : b0;
        for (int e = g * grp; e < (g + 1) * grp; ++e) {
          const double x = k[at + e];
          w[at + e] = static_cast<float>(
              std::max(std::fabs(x - b0) + std::fabs(b0), std::fabs(x - b1) + std::fabs(b1)));
        }
      }
      if (!turbo) continue;
      KvDequantParams p;
      p.scheme = s.format.scheme;
      p.n_rows = 1;
      p.in = kv_planes_interleaved(const_cast<uint8_t*>(row), lay);
      p.v = rot.data();
      p.v_rotated = true;
      kvcodec_dequant_ref(p);
      for (float x : rot) *r_max = std::max(*r_max, static_cast<double>(std::fabs(x)));
      if (!fused_int8_values(s)) continue;
      const int64_t kt = (s.pos0 + t) * s.format.n_kv_heads + h;
      for (int g = 0; g < d / 32; ++g) {
        const double sc = std::fabs(f16_at(row + lay.v_scale_offset + 2 * g));  // v_absmax: signed
        vs[kt] = std::max(vs[kt], sc);
        if (sc > 0)
          for (int e = 32 * g; e < 32 * g + 32; ++e) cl1[kt] += std::fabs(rot[e]) / sc;
      }
    }
  }
}

// ε_V of one (query, head) (header): scores of keys lo.., the kv head's per-key V scale
// and centroid L1.
double int8_v_eps(const std::vector<double>& score, int64_t lo, int kh, int nkv, int d,
                  const std::vector<double>& vs, const std::vector<double>& cl1, double step) {
  const int64_t n = static_cast<int64_t>(score.size());
  const double mx = *std::max_element(score.begin(), score.end());
  std::vector<double> ps(static_cast<size_t>(n));
  double l = 0, sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double p = std::exp(score[static_cast<size_t>(j)] - mx);
    const size_t kt = static_cast<size_t>((lo + j) * nkv + kh);
    l += p;
    ps[static_cast<size_t>(j)] = p * vs[kt];
    sum += p * vs[kt] * d * step / 2;
  }
  for (int64_t j = 0; j < n; ++j) {
    const size_t kt = static_cast<size_t>((lo + j) * nkv + kh);
    if (vs[kt] == 0) continue;
    double win = 0;
    for (int64_t o = std::max<int64_t>(0, j - 31); o <= std::min(n - 1, j + 31); ++o)
      win = std::max(win, ps[static_cast<size_t>(o)]);
    sum += win * (cl1[kt] + d * step / 2) / 510;
  }
  return sum / (l * std::sqrt(static_cast<double>(d)));
}

}  // namespace

double fused_bound(const FusedBoundInputs& t, int head_dim, int64_t n_kv, RefQuery rq,
                   FusedIsa isa) {
  if (isa == FusedIsa::kAuto) isa = fused_auto_isa(head_dim);
  const double u = std::ldexp(1.0, -24);
  const double sd = std::sqrt(static_cast<double>(head_dim));
  const double eps_q8 = (rq == RefQuery::kFp32 ? t.q8_ds_max : 0.0) + 2.0 * sd * u * t.q8_mag_max;
  return std::expm1(2.0 * eps_q8) * t.v_max + 4.0 * sd * u * t.qk_abs_max * t.v_max +
         (2.0 * std::sqrt(static_cast<double>(n_kv)) + 8) * u * t.v_max +
         2.0 * std::sqrt(std::log2(static_cast<double>(head_dim))) * u * sd * t.r_max +
         (isa == FusedIsa::kAvx512Int8V ? 2.0 * std::exp(2.0 * eps_q8) * t.v_i8_max : 0.0) + 1e-30;
}

double fused_v_i8_bound(const FusedBoundInputs& t) {
  return 2.0 * t.v_i8_max + 1e-30;
}

FusedBoundInputs fused_bound_inputs(const KvSegmentView* segs, int n_segs, const AttnArgs& a) {
  TKV_CHECK(n_segs >= 1);
  const int d = segs[0].format.head_dim(), nkv = segs[0].format.n_kv_heads, group = a.n_heads / nkv;
  const int64_t n_total = segs[n_segs - 1].pos0 + segs[n_segs - 1].n_kv;
  std::vector<float> k(static_cast<size_t>(n_total * nkv * d)), v(k.size());
  kv_segments_dequant(segs, n_segs, k.data(), v.data());
  FusedBoundInputs t;
  std::vector<float> w(k.size());
  std::vector<uint8_t> i8(static_cast<size_t>(n_total), 0);  // key scored with the int8 query
  // int8 V dot: per key (and kv head) the largest V group scale and the centroid L1
  std::vector<double> vs(static_cast<size_t>(n_total * nkv), 0.0), cl1(vs.size(), 0.0);
  double step = 0;
  for (int s = 0; s < n_segs; ++s) {
    if (!fused_int8_query(segs[s])) continue;
    quantized_rows(segs[s], k.data(), w.data(), &t.r_max, vs.data(), cl1.data());
    if (fused_int8_values(segs[s]))
      step = std::max<double>(step, fused::int8_codebook_for(segs[s].format.scheme.v_bits,
                                                             segs[s].format.scheme.v_absmax)
                                        ->step);
    std::fill(i8.begin() + segs[s].pos0, i8.begin() + segs[s].pos0 + segs[s].n_kv, 1);
  }
  for (float x : v) t.v_max = std::max(t.v_max, static_cast<double>(std::fabs(x)));
  for (int64_t i = 0; i < a.n_q; ++i) {
    const int64_t pos = a.q_pos0 + i;  // visible keys [lo, hi] as in attention_f32_ref
    const int64_t hi = std::min(pos, n_total - 1);
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
    for (int h = 0; h < a.n_heads; ++h) {
      const float* q = a.q + (i * a.n_heads + h) * d;
      double qmax = 0;
      for (int e = 0; e < d; ++e) qmax = std::max(qmax, static_cast<double>(std::fabs(q[e])));
      const double qs = qmax / 127.0;
      std::vector<double> score(static_cast<size_t>(hi - lo + 1));
      for (int64_t j = lo; j <= hi; ++j) {
        const size_t r = static_cast<size_t>((j * nkv + h / group) * d);
        double sabs = 0, kabs = 0, mag = 0, dot = 0;
        for (int e = 0; e < d; ++e) {
          const double qe = std::fabs(q[e]), ke = std::fabs(k[r + e]);
          sabs += qe * ke, kabs += ke, mag += (qe + qs / 2) * w[r + e], dot += q[e] * k[r + e];
        }
        score[static_cast<size_t>(j - lo)] = dot * a.scale;
        t.qk_abs_max = std::max(t.qk_abs_max, sabs * a.scale);
        if (!i8[static_cast<size_t>(j)]) continue;
        t.q8_ds_max = std::max(t.q8_ds_max, a.scale * qs / 2 * kabs);
        t.q8_mag_max = std::max(t.q8_mag_max, a.scale * mag);
      }
      if (step > 0)
        t.v_i8_max = std::max(t.v_i8_max, int8_v_eps(score, lo, h / group, nkv, d, vs, cl1, step));
    }
  }
  return t;
}

double fused_attention_bound(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                             RefQuery rq) {
  const int64_t n_total = segs[n_segs - 1].pos0 + segs[n_segs - 1].n_kv;
  return fused_bound(fused_bound_inputs(segs, n_segs, a), segs[0].format.head_dim(), n_total, rq);
}

}  // namespace tkv::kernels
