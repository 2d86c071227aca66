// TurboQuant key codec: unrotated asymmetric affine per 32-group, bit-exact with
// the Metal tq_encode kernel (spec turboquant-codec.md §1.2, §1.4): fp16 scale and
// zero, fp16 quotients, q - zp and rint (half-even) in fp32. Signed 8-bit stores
// int8 [-127,127]; unsigned b-bit stores [0, 2^b-1]. One deliberate deviation, the
// degenerate-group guard (docs/kv-format.md): it fires only where the reference
// would store scale 0 or a non-finite zero (and so dequantize to NaN/Inf).
#pragma once
#include <cstdint>

#include "quant/bitpack.h"
#include "quant/kv_math.h"

namespace tkv::quant {

constexpr int kTurboGroup = 32;

struct TurboKGroup {
  uint16_t scale;  // fp16 bits
  uint16_t zero;   // fp16 bits, integer-valued (x̂ = (idx + zero) * scale)
};

// Per-group parameters from the (sanitised) group min/max. Returns false when the
// guard fires (reference: scale 0 or non-finite zero, i.e. NaN/Inf on dequant);
// then the group is stored as the constant h(mid): scale 1, zero h(mid), idx 0.
TKV_HD bool turbo_k_group_params(float mn, float mx, int bits, bool is_signed, float* s,
                                 float* zp) {
  float range = round_f16(mx - mn);
  if (range > kF16Max) range = kF16Max;  // guard: fp16 range overflow saturates
  if (is_signed) {
    *s = f16_div(range, 254.0f);
    *zp = rintf(f16_div(round_f16(mx + mn), 2.0f * *s));
  } else {
    *s = f16_div(range, (float)((1 << bits) - 1));
    *zp = rintf(f16_div(round_f16(mn), *s));
  }
  // rint(-0.3) = -0: the goldens store +0 there (same x̂), so canonicalise the sign.
  *zp = add_rn(*zp, 0.0f);
  if (*s == 0.0f || !is_finite_f32(*zp)) {
    *s = 1.0f;
    *zp = round_f16(mul_rn(0.5f, add_rn(mn, mx)));
    return false;
  }
  return true;
}

// Stored byte of one sanitised element: rint(h(x) ⊘ s - zp) clamped (in float, so
// an Inf quotient saturates without UB) to [-127,127] (signed) or [0, 2^bits-1].
TKV_HD uint8_t turbo_k_quantize(float x, float s, float zp, int bits, bool is_signed) {
  const float max_q = is_signed ? 127.0f : (float)((1 << bits) - 1);
  const float min_q = is_signed ? -127.0f : 0.0f;
  const float q = f16_div(round_f16(x), s);
  const float r = fminf(fmaxf(rintf(q - zp), min_q), max_q);
  return (uint8_t)(int)r;  // int8 two's complement byte when signed
}

// Encodes one 32-group. idx[i] receives the stored byte: two's complement of
// [-127,127] when is_signed (bits must be 8), else [0, 2^bits - 1].
TKV_HD TurboKGroup turbo_k_encode_group(const float* x /*[32]*/, int bits, bool is_signed,
                                        uint8_t* idx /*[32]*/) {
  float mn = kF16Max, mx = -kF16Max;
  for (int i = 0; i < kTurboGroup; ++i) {
    const float v = sanitize_kv_input(x[i]);
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  float s, zp;
  const bool regular = turbo_k_group_params(mn, mx, bits, is_signed, &s, &zp);
  for (int i = 0; i < kTurboGroup; ++i) {
    idx[i] = regular ? turbo_k_quantize(sanitize_kv_input(x[i]), s, zp, bits, is_signed) : 0;
  }
  return {f32_to_f16(s), f32_to_f16(zp)};
}

// Dequantizes one stored index: (idx + zero) * scale in fp32.
TKV_HD float turbo_k_dequant(uint32_t stored, bool is_signed, float zero, float scale) {
  const float q = is_signed ? (float)(int8_t)(uint8_t)stored : (float)stored;
  return mul_rn(add_rn(q, zero), scale);
}

// Encodes one (token, kv-head) key row.
TKV_HD void turbo_k_encode_row(const float* x /*[head_dim]*/, int head_dim, int bits,
                               bool is_signed, uint8_t* packed /*[head_dim*bits/8]*/,
                               uint16_t* scale /*[head_dim/32]*/,
                               uint16_t* zero /*[head_dim/32]*/) {
  uint8_t idx[kTurboGroup];
  for (int g = 0; g < head_dim / kTurboGroup; ++g) {
    const TurboKGroup p = turbo_k_encode_group(x + g * kTurboGroup, bits, is_signed, idx);
    scale[g] = p.scale;
    zero[g] = p.zero;
    bitpack_pack(idx, kTurboGroup, bits, packed + g * bitpack_bytes(kTurboGroup, bits));
  }
}

// Dequantizes one key row to fp32.
TKV_HD void turbo_k_dequant_row(const uint8_t* packed /*[head_dim*bits/8]*/,
                                const uint16_t* scale /*[head_dim/32]*/,
                                const uint16_t* zero /*[head_dim/32]*/, int head_dim, int bits,
                                bool is_signed, float* out /*[head_dim]*/) {
  for (int i = 0; i < head_dim; ++i) {
    const int g = i / kTurboGroup;
    out[i] = turbo_k_dequant(bitpack_get(packed, i, bits), is_signed, f16_to_f32(zero[g]),
                             f16_to_f32(scale[g]));
  }
}

// Symmetric keys (KvScheme::k_symmetric; not in the reference, docs/kv-format.md §4.2):
// per 32-group one fp16 scale d = h(m / -2^(b-1)), m the sanitised group's signed extreme
// (mx if mx >= -mn, else mn: the rule of GGML's q4_0, so m itself lands on the code 0 and
// all 2^b codes are used), and codes rint(x / d) + 2^(b-1) clamped to [0, 2^b - 1] in fp32
// (x unrounded: this format has no fp16 reference to match). x̂ = (code - 2^(b-1)) * d, the
// unsigned dequant with the implied zero -2^(b-1). d == 0 (an all-zero group, or |m| below
// fp16's range) stores every code 2^(b-1), x̂ = 0.
TKV_HD float turbo_ks_group_scale(float mn, float mx, int bits) {
  const float m = mx >= -mn ? mx : mn;
  return round_f16(m / -static_cast<float>(1 << (bits - 1)));
}

TKV_HD uint8_t turbo_ks_quantize(float x, float d, int bits) {
  const float half = static_cast<float>(1 << (bits - 1));
  if (d == 0.0f) return static_cast<uint8_t>(1 << (bits - 1));
  const float r = fminf(fmaxf(rintf(x / d), -half), half - 1.0f);
  return static_cast<uint8_t>(static_cast<int>(r) + (1 << (bits - 1)));
}

// Encodes one key row symmetrically (no zero plane).
TKV_HD void turbo_ks_encode_row(const float* x /*[head_dim]*/, int head_dim, int bits,
                                uint8_t* packed /*[head_dim*bits/8]*/,
                                uint16_t* scale /*[head_dim/32]*/) {
  uint8_t idx[kTurboGroup];
  for (int g = 0; g < head_dim / kTurboGroup; ++g) {
    const float* xg = x + g * kTurboGroup;
    float mn = kF16Max, mx = -kF16Max;
    for (int i = 0; i < kTurboGroup; ++i) {
      const float v = sanitize_kv_input(xg[i]);
      mn = fminf(mn, v);
      mx = fmaxf(mx, v);
    }
    const float d = turbo_ks_group_scale(mn, mx, bits);
    for (int i = 0; i < kTurboGroup; ++i)
      idx[i] = turbo_ks_quantize(sanitize_kv_input(xg[i]), d, bits);
    scale[g] = f32_to_f16(d);
    bitpack_pack(idx, kTurboGroup, bits, packed + g * bitpack_bytes(kTurboGroup, bits));
  }
}

// Dequantizes one symmetric key row to fp32: (code - 2^(b-1)) * d.
TKV_HD void turbo_ks_dequant_row(const uint8_t* packed, const uint16_t* scale, int head_dim,
                                 int bits, float* out /*[head_dim]*/) {
  const float zero = -static_cast<float>(1 << (bits - 1));
  for (int i = 0; i < head_dim; ++i)
    out[i] = turbo_k_dequant(bitpack_get(packed, i, bits), false, zero,
                             f16_to_f32(scale[i / kTurboGroup]));
}

}  // namespace tkv::quant
