// Uniform affine KV codec (the baseline scheme): groups of 64 along head_dim,
// 4 or 8 bits, fp16 scale and fp16 bias (the group min) per group, same LSB-first
// bitstream as TurboQuant. s = h((mx-mn)/M), b = h(mn), q = clamp(rint((x-b)/s),0,M),
// x̂ = q*s + b, all fp32 with no FMA; a group with s == 0 stores q = 0 (x̂ = h(mn)).
// Exact rules: docs/kv-format.md.
#pragma once
#include <cstdint>

#include "quant/bitpack.h"
#include "quant/kv_math.h"

namespace tkv::quant {

constexpr int kAffineGroup = 64;

struct AffineGroup {
  uint16_t scale;  // fp16 bits
  uint16_t bias;   // fp16 bits (the rounded group minimum)
};

// Encodes one 64-group; idx[i] in [0, 2^bits - 1].
TKV_HD AffineGroup affine_encode_group(const float* x /*[64]*/, int bits, uint8_t* idx /*[64]*/) {
  float mn = kF16Max, mx = -kF16Max;
  for (int i = 0; i < kAffineGroup; ++i) {
    const float v = sanitize_kv_input(x[i]);
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  const float max_q = (float)((1 << bits) - 1);
  const float s = round_f16((mx - mn) / max_q);
  const float b = round_f16(mn);
  for (int i = 0; i < kAffineGroup; ++i) {
    float q = 0.0f;  // s == 0 (constant group or range below fp16 resolution): x̂ = b
    if (s != 0.0f) q = fminf(fmaxf(rintf((sanitize_kv_input(x[i]) - b) / s), 0.0f), max_q);
    idx[i] = (uint8_t)(int)q;
  }
  return {f32_to_f16(s), f32_to_f16(b)};
}

TKV_HD float affine_dequant(uint32_t q, float scale, float bias) {
  return add_rn(mul_rn((float)q, scale), bias);
}

TKV_HD void affine_encode_row(const float* x /*[head_dim]*/, int head_dim, int bits,
                              uint8_t* packed /*[head_dim*bits/8]*/,
                              uint16_t* scale /*[head_dim/64]*/, uint16_t* bias /*[head_dim/64]*/) {
  uint8_t idx[kAffineGroup];
  for (int g = 0; g < head_dim / kAffineGroup; ++g) {
    const AffineGroup p = affine_encode_group(x + g * kAffineGroup, bits, idx);
    scale[g] = p.scale;
    bias[g] = p.bias;
    bitpack_pack(idx, kAffineGroup, bits, packed + g * bitpack_bytes(kAffineGroup, bits));
  }
}

TKV_HD void affine_dequant_row(const uint8_t* packed /*[head_dim*bits/8]*/,
                               const uint16_t* scale /*[head_dim/64]*/,
                               const uint16_t* bias /*[head_dim/64]*/, int head_dim, int bits,
                               float* out /*[head_dim]*/) {
  for (int i = 0; i < head_dim; ++i) {
    const int g = i / kAffineGroup;
    out[i] =
        affine_dequant(bitpack_get(packed, i, bits), f16_to_f32(scale[g]), f16_to_f32(bias[g]));
  }
}

}  // namespace tkv::quant
