// The TurboQuant value bucket, and the MSE-fitted value scale of KvScheme::v_mse_scale
// (docs/kv-format.md §5.1): per 32-group, the fp16 scale s minimizing the group's squared
// error sum_i (rh_i - c[idx_i(s)] * s)^2, idx_i(s) = bucket(rh_i ⊘ s), among the RMS scale,
// four fixed multiples of it and two Lloyd refinements. Decode stays c[idx] * s. Every sum
// over the group runs in one fixed pairwise order (turbo_v_fit_sum: a warp's xor-butterfly)
// and every product/sum is mul_rn/add_rn, so the scalar and SIMD codecs and the CUDA encode
// (one element per lane, shuffle reductions) store the same bits.
#pragma once
#include <cstdint>

#include "quant/kv_math.h"
#include "quant/turbo_k.h"  // kTurboGroup

namespace tkv::quant {

// Index of vn among 2^bits - 1 ascending boundaries (ties go low, NaN -> 0).
TKV_HD uint32_t turbo_v_bucket(float vn, const float* boundaries /*[2^bits-1]*/, int bits) {
  uint32_t idx = 0;
  const int n = (1 << bits) - 1;
  for (int i = 0; i < n; ++i) idx += vn > boundaries[i] ? 1u : 0u;
  return idx;
}

// The candidates: the RMS scale, h(s_rms * m) for the fixed multiples m below, then
// kTurboVFitSteps Lloyd refinements of the best so far.
constexpr int kTurboVFitGrid = 4;
constexpr int kTurboVFitSteps = 2;
TKV_HD float turbo_v_fit_multiple(int j) {
  return j == 0 ? 0.8f : j == 1 ? 0.9f : j == 2 ? 1.1f : 1.2f;
}

// Sum of a group's 32 terms in the order of a warp's xor-butterfly: x[i] += x[i + h] for
// h = 16, 8, 4, 2, 1 (x is overwritten; the result is x[0]).
TKV_HD float turbo_v_fit_sum(float* x /*[32]*/) {
  for (int h = kTurboGroup / 2; h > 0; h >>= 1)
    for (int i = 0; i < h; ++i) x[i] = add_rn(x[i], x[i + h]);
  return x[0];
}

// One pass over a group at the fp16 scale s: the squared error of the decode c[idx]*s,
// E = sum (rh - c*s)^2, and the least-squares statistics of those assignments,
// num = sum rh*c and den = sum c*c.
struct TurboVFitPass {
  float err = 0.0f, num = 0.0f, den = 0.0f;
};
TKV_HD TurboVFitPass turbo_v_fit_pass(const float* rh /*[32]*/, float s,
                                      const float* centroids /*[2^bits]*/,
                                      const float* boundaries /*[2^bits-1]*/, int bits) {
  float e2[kTurboGroup], num[kTurboGroup], den[kTurboGroup];
  for (int i = 0; i < kTurboGroup; ++i) {
    const float c = centroids[turbo_v_bucket(f16_div(rh[i], s), boundaries, bits)];
    const float d = add_rn(rh[i], -mul_rn(c, s));
    e2[i] = mul_rn(d, d);
    num[i] = mul_rn(rh[i], c);
    den[i] = mul_rn(c, c);
  }
  TurboVFitPass p;
  p.err = turbo_v_fit_sum(e2);
  p.num = turbo_v_fit_sum(num);
  p.den = turbo_v_fit_sum(den);
  return p;
}

// The search, over any pass(s) -> TurboVFitPass that computes turbo_v_fit_pass's bits
// (the SIMD codec in registers, the CUDA kernel with warp shuffles). Grid candidates first, then
// each Lloyd step s <- h(num/den) of the best assignments so far (the scale minimizing the error
// with those indices held), re-bucketed; the lowest exact error wins, ties keep the earlier
// candidate. Never worse than s_rms; a zero scale stays zero.
template <typename Pass>
TKV_HD float turbo_v_fit_search(float s_rms, Pass pass) {
  if (!(s_rms > 0.0f)) return s_rms;
  TurboVFitPass best_p = pass(s_rms);
  float best = s_rms;
  for (int j = 0; j < kTurboVFitGrid; ++j) {
    const float t = round_f16(mul_rn(s_rms, turbo_v_fit_multiple(j)));
    if (!(t > 0.0f) || !is_finite_f32(t)) continue;
    const TurboVFitPass q = pass(t);
    if (q.err < best_p.err) {
      best_p = q;
      best = t;
    }
  }
  TurboVFitPass p = best_p;
  float s = best;
  for (int step = 0; step < kTurboVFitSteps; ++step) {
    const float t = round_f16(p.num / p.den);
    if (!(t > 0.0f) || !is_finite_f32(t) || t == s) break;
    s = t;
    p = pass(s);
    if (p.err < best_p.err) {
      best_p = p;
      best = s;
    }
  }
  return best;
}

// The fitted scale of one group of fp16 values rh whose RMS scale (already fp16) is s_rms.
TKV_HD float turbo_v_fit_scale(const float* rh /*[32]*/, float s_rms,
                               const float* centroids /*[2^bits]*/,
                               const float* boundaries /*[2^bits-1]*/, int bits) {
  return turbo_v_fit_search(
      s_rms, [&](float s) { return turbo_v_fit_pass(rh, s, centroids, boundaries, bits); });
}

// KvScheme::v_absmax (docs/kv-format.md §5.2): the signed extreme m of the fp16 group rh
// (mx if mx >= -mn, else mn), then the search above from |m| on the group times sign(m)
// (exact), the sign put back. rh ⊘ s then equals (sign(m)·rh) ⊘ |s| bit for bit, so the
// assignments are those the search scored. A zero group keeps scale 0.
TKV_HD float turbo_v_signed_extreme(const float* rh /*[32]*/) {
  float mn = rh[0], mx = rh[0];
  for (int i = 1; i < kTurboGroup; ++i) mn = fminf(mn, rh[i]), mx = fmaxf(mx, rh[i]);
  return mx >= -mn ? mx : mn;
}
TKV_HD float turbo_v_absmax_scale(const float* rh /*[32]*/,
                                  const float* centroids /*[2^bits], absmax codebook*/,
                                  const float* boundaries /*[2^bits-1]*/, int bits) {
  const float m = turbo_v_signed_extreme(rh);
  const float t = m < 0.0f ? -1.0f : 1.0f;
  float rf[kTurboGroup];
  for (int i = 0; i < kTurboGroup; ++i) rf[i] = mul_rn(t, rh[i]);
  return mul_rn(t, turbo_v_fit_scale(rf, fabsf(m), centroids, boundaries, bits));
}

}  // namespace tkv::quant
