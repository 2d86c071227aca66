// Scalar arithmetic shared by every KV codec (TurboQuant K/V, affine KV):
// fp16 rounding h(.), fp16 division (float divide then RNE, correct by double
// rounding since 24 >= 2*11+2 bits), input sanitising, and mul/add that never
// contract into FMA on CUDA (nvcc fuses by default), so host == device bits.
#pragma once
#include <math.h>

#include <cstdint>

#include "quant/half.h"

namespace tkv::quant {

constexpr float kF16Max = 65504.0f;

TKV_HD bool is_finite_f32(float x) {
  return (f32_bits(x) & 0x7f800000u) != 0x7f800000u;
}

// The empty asm makes the product opaque, so g++'s default -ffp-contract=fast cannot
// fuse it into a following add in whatever TU inlines this (it emits no instruction).
TKV_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(p));
#endif
  return p;
#endif
}
TKV_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// a ⊘ b for fp16-valued a, b: the correctly rounded fp16 quotient, as a float.
TKV_HD float f16_div(float a, float b) {
  return round_f16(a / b);
}

// Input policy of every KV encoder: NaN -> 0, everything else clamped to the
// finite fp16 range (so +-Inf -> +-65504), and -0 -> +0 so that group min/max
// (and the stored zero's sign) do not depend on reduction order. Identity on
// every other finite fp16 value.
TKV_HD float sanitize_kv_input(float x) {
  if (!(x == x)) return 0.0f;
  return add_rn(fminf(fmaxf(x, -kF16Max), kF16Max), 0.0f);
}

// The bf16 scheme's encoder: NaN -> 0, clamp to the finite bf16 range (so +-Inf and
// values that would round past it give +-max bf16), then RNE.
TKV_HD uint16_t bf16_kv_encode(float x) {
  const float max_bf16 = bits_f32(0x7f7f0000u);
  if (!(x == x)) return 0;
  return f32_to_bf16(fminf(fmaxf(x, -max_bf16), max_bf16));
}

// f16 KV element: NaN -> 0 and saturated to ±65504, so a row never holds Inf/NaN.
TKV_HD uint16_t f16_kv_encode(float x) {
  if (!(x == x)) return 0;
  return f32_to_f16(fminf(fmaxf(x, -kF16Max), kF16Max));
}

}  // namespace tkv::quant
