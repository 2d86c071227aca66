// IEEE fp16 and bf16 <-> fp32 conversions, round-to-nearest-even, usable on
// host and device (no CUDA headers needed). Bit-exact with F16C / __float2half_rn.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TKV_HD __host__ __device__ __forceinline__
#else
#define TKV_HD inline
#endif

namespace tkv {

TKV_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
TKV_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// fp16 bits -> fp32 (exact).
TKV_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = (float)mant * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

// fp32 -> fp16 bits, round to nearest even; overflow -> inf; NaN stays NaN (quiet).
TKV_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {  // below smallest normal half (2^-14): subnormal or zero
    if (ax < 0x33000000u) return (uint16_t)sign;  // < 2^-25 rounds to 0 (2^-25 ties to even 0)
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // result mantissa = m >> (shift) with 24-bit m
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((ax - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return (uint16_t)(sign | r);
}

// fp32 rounded through fp16 (the codec's h(.)).
TKV_HD float round_f16(float f) {
  return f16_to_f32(f32_to_f16(f));
}

// bf16 <-> fp32, round to nearest even, NaN preserved.
TKV_HD float bf16_to_f32(uint16_t b) {
  return bits_f32((uint32_t)b << 16);
}
TKV_HD uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

}  // namespace tkv
