// Per-block dequantizers of the GGML weight types: THE single definition that
// the reference, CPU SIMD and CUDA paths mirror; arithmetic and operation order
// are ggml's dequantize_row_* (ggml/src/ggml-quants.c). Every product here is
// exact in fp32 (fp16 scale: 11 significant bits, x 6-8-bit sub-scale, x <= 6-bit
// quant: <= 24 bits), so FMA vs mul+add and any product order give the same bits.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/ggml_blocks.h"
#include "quant/half.h"

namespace tkv::ggml {

// ---- float types (one element per "block") ----
TKV_HD float dequantize_f16(uint16_t h) {
  return f16_to_f32(h);
}
TKV_HD float dequantize_bf16(uint16_t b) {
  return bf16_to_f32(b);
}

// ---- 32-element blocks ----
TKV_HD void dequantize_block(const BlockQ4_0& b, float* y) {  // y: [32]
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    y[j] = (float)((b.qs[j] & 0x0F) - 8) * d;
    y[j + kQK4_0 / 2] = (float)((b.qs[j] >> 4) - 8) * d;
  }
}

TKV_HD void dequantize_block(const BlockQ4_1& b, float* y) {  // y: [32]
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < kQK4_1 / 2; ++j) {
    y[j] = (float)(b.qs[j] & 0x0F) * d + m;
    y[j + kQK4_1 / 2] = (float)(b.qs[j] >> 4) * d + m;
  }
}

TKV_HD uint32_t load_u32_le(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

TKV_HD void dequantize_block(const BlockQ5_0& b, float* y) {  // y: [32]
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK5_0 / 2; ++j) {
    const int xh0 = (int)(((qh >> j) << 4) & 0x10);
    const int xh1 = (int)((qh >> (j + 12)) & 0x10);
    y[j] = (float)(((b.qs[j] & 0x0F) | xh0) - 16) * d;
    y[j + kQK5_0 / 2] = (float)(((b.qs[j] >> 4) | xh1) - 16) * d;
  }
}

TKV_HD void dequantize_block(const BlockQ5_1& b, float* y) {  // y: [32]
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK5_1 / 2; ++j) {
    const int xh0 = (int)(((qh >> j) << 4) & 0x10);
    const int xh1 = (int)((qh >> (j + 12)) & 0x10);
    y[j] = (float)((b.qs[j] & 0x0F) | xh0) * d + m;
    y[j + kQK5_1 / 2] = (float)((b.qs[j] >> 4) | xh1) * d + m;
  }
}

TKV_HD void dequantize_block(const BlockQ8_0& b, float* y) {  // y: [32]
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK8_0; ++j) y[j] = (float)b.qs[j] * d;
}

// ---- 256-element K-quant super-blocks ----
TKV_HD void dequantize_block(const BlockQ2_K& b, float* y) {  // y: [256]
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128) {
    const uint8_t* q = b.qs + n / 4;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {  // two 16-element groups per shift
        const uint8_t sc = b.scales[is++];
        const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
  }
}

// The 16 6-bit Q3_K scales, unpacked from 12 bytes and biased to [-32, 31]
// (ggml's kmask1/kmask2 shuffle, written per byte so it is endian-free).
TKV_HD void unpack_q3_k_scales(const uint8_t* packed, int* scales) {  // packed: [12], scales: [16]
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = (lo | (hi << 4)) - 32;
  }
}

TKV_HD void dequantize_block(const BlockQ3_K& b, float* y) {  // y: [256]
  const float d_all = f16_to_f32(b.d);
  int scales[16];
  unpack_q3_k_scales(b.scales, scales);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < kQK_K; n += 128) {
    const uint8_t* q = b.qs + n / 4;
    for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * (float)scales[is++];
        for (int l = 0; l < 16; ++l) {
          const int k = l + 16 * half;
          const int v = ((q[k] >> shift) & 3) - ((b.hmask[k] & m) ? 0 : 4);
          *y++ = dl * (float)v;
        }
      }
    }
  }
}

// 6-bit scale and min j (0..7) of a Q4_K / Q5_K super-block (ggml get_scale_min_k4).
TKV_HD void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {  // q: [12]
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

TKV_HD void dequantize_block(const BlockQ4_K& b, float* y) {  // y: [256]
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2, q += 32) {
    uint8_t sc, m;
    get_scale_min_k4(is, b.scales, &sc, &m);
    const float d1 = d * (float)sc, m1 = dmin * (float)m;
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const float d2 = d * (float)sc, m2 = dmin * (float)m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (float)(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (float)(q[l] >> 4) - m2;
  }
}

TKV_HD void dequantize_block(const BlockQ5_K& b, float* y) {  // y: [256]
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const uint8_t* ql = b.qs;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
    uint8_t sc, m;
    get_scale_min_k4(is, b.scales, &sc, &m);
    const float d1 = d * (float)sc, m1 = dmin * (float)m;
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const float d2 = d * (float)sc, m2 = dmin * (float)m;
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * (float)((ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
  }
}

TKV_HD void dequantize_block(const BlockQ6_K& b, float* y) {  // y: [256]
  const float d = f16_to_f32(b.d);
  for (int n = 0; n < 2; ++n, y += 128) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    const int8_t* sc = b.scales + 8 * n;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      // (d * scale) * q, left to right as in ggml.
      y[l + 0] = d * (float)sc[is + 0] * (float)q1;
      y[l + 32] = d * (float)sc[is + 2] * (float)q2;
      y[l + 64] = d * (float)sc[is + 4] * (float)q3;
      y[l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
  }
}

TKV_HD void dequantize_block(const BlockQ8_K& b, float* y) {  // y: [256]
  for (int j = 0; j < kQK_K; ++j) y[j] = b.d * (float)b.qs[j];
}

}  // namespace tkv::ggml
