// TurboQuant value codec, bit-exact with Metal tq_encode (spec §2.2, §2.5):
// random-sign FWHT (fp32, 1/√D), h() to fp16, per-32-group RMS scale (sequential
// fp32 sum of squares in index order, as the goldens), fp16 quotient, and
// idx = #{i : vn > B[i]} over fp32 midpoint boundaries. Dequant is c[idx]*scale in
// the rotated domain, followed (optionally, deferred) by fwht_inverse. With fit
// centroids (KvScheme::v_mse_scale) the stored scale is turbo_v_fit_scale's instead; with
// absmax (KvScheme::v_absmax) the search starts from the group's signed extreme and the
// centroids/boundaries are the absmax-anchored codebook's.
#pragma once
#include <cstdint>

#include "quant/bitpack.h"
#include "quant/fwht.h"
#include "quant/turbo_k.h"
#include "quant/turbo_v_fit.h"  // turbo_v_bucket, turbo_v_fit_scale

namespace tkv::quant {

// Encodes one 32-group of rotated values r (fp32, after the forward FWHT).
// Values past the fp16 range saturate to +-65504 (reference: Inf -> NaN).
// fit_centroids null: the RMS scale (the reference); else the fitted scale.
TKV_HD uint16_t turbo_v_encode_group(const float* r /*[32]*/,
                                     const float* boundaries /*[2^bits-1]*/, int bits,
                                     uint8_t* idx /*[32]*/,
                                     const float* fit_centroids /*[2^bits] or null*/ = nullptr,
                                     bool absmax = false) {
  float rh[kTurboGroup];
  float ss = 0.0f;
  for (int i = 0; i < kTurboGroup; ++i) {
    rh[i] = round_f16(fminf(fmaxf(r[i], -kF16Max), kF16Max));
    ss = add_rn(ss, mul_rn(rh[i], rh[i]));
  }
  float s = round_f16(sqrtf(mul_rn(ss, 1.0f / 32.0f)));
  if (absmax)
    s = turbo_v_absmax_scale(rh, fit_centroids, boundaries, bits);
  else if (fit_centroids)
    s = turbo_v_fit_scale(rh, s, fit_centroids, boundaries, bits);
  for (int i = 0; i < kTurboGroup; ++i) {
    // s == 0 (group ~0): 0/0 = NaN -> idx 0, +-x/0 -> +-Inf -> end bins, exactly as
    // the reference; dequant is then c*0 = +-0 either way.
    idx[i] = (uint8_t)turbo_v_bucket(f16_div(rh[i], s), boundaries, bits);
  }
  return f32_to_f16(s);
}

// Encodes one (token, kv-head) value row; scratch holds the rotated row.
TKV_HD void turbo_v_encode_row(const float* x /*[head_dim]*/, int head_dim, int bits,
                               const float* sign /*[head_dim]*/, float inv_sqrt,
                               const float* boundaries /*[2^bits-1]*/,
                               float* scratch /*[head_dim]*/, uint8_t* packed /*[head_dim*bits/8]*/,
                               uint16_t* scale /*[head_dim/32]*/,
                               const float* fit_centroids /*[2^bits] or null*/ = nullptr,
                               bool absmax = false) {
  for (int i = 0; i < head_dim; ++i) scratch[i] = sanitize_kv_input(x[i]);
  fwht_forward(scratch, head_dim, sign, inv_sqrt);
  uint8_t idx[kTurboGroup];
  for (int g = 0; g < head_dim / kTurboGroup; ++g) {
    scale[g] = turbo_v_encode_group(scratch + g * kTurboGroup, boundaries, bits, idx, fit_centroids,
                                    absmax);
    bitpack_pack(idx, kTurboGroup, bits, packed + g * bitpack_bytes(kTurboGroup, bits));
  }
}

// Rotated-domain dequant: out[d] = c[idx[d]] * scale[d/32] (no inverse FWHT).
TKV_HD void turbo_v_dequant_rotated_row(const uint8_t* packed /*[head_dim*bits/8]*/,
                                        const uint16_t* scale /*[head_dim/32]*/, int head_dim,
                                        int bits, const float* centroids /*[2^bits]*/,
                                        float* out /*[head_dim]*/) {
  for (int i = 0; i < head_dim; ++i) {
    out[i] = mul_rn(centroids[bitpack_get(packed, i, bits)], f16_to_f32(scale[i / kTurboGroup]));
  }
}

// Full dequant: rotated-domain values, then sign ⊙ H(.)/√D.
TKV_HD void turbo_v_dequant_row(const uint8_t* packed /*[head_dim*bits/8]*/,
                                const uint16_t* scale /*[head_dim/32]*/, int head_dim, int bits,
                                const float* centroids /*[2^bits]*/,
                                const float* sign /*[head_dim]*/, float inv_sqrt,
                                float* out /*[head_dim]*/) {
  turbo_v_dequant_rotated_row(packed, scale, head_dim, bits, centroids, out);
  fwht_inverse(out, head_dim, sign, inv_sqrt);
}

}  // namespace tkv::quant
