// Per-format decode of one 32-element unit of a GGUF weight row from shared memory into
// 32 fp32 registers, mirroring quant/ggml_dequant.h value for value (every value there is
// exact in fp32, so these are the reference's bits). A unit is a whole 32-element block,
// a 32-element sub-block of a K-quant super-block, or 32 elements of a float row.
// Blocks sit at 2-byte alignment in the stage (18/20/22/34/210-byte blocks), 16-byte for
// Q4_K/Q5_K/floats (their rows are whole multiples of 16 bytes).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/ggml_blocks.h"

namespace tkv::kernels::cuda_detail {

__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
// 4 little-endian bytes at a 2-byte-aligned shared-memory address.
__device__ __forceinline__ uint32_t lds_u32(const uint8_t* p) {
  return lds_u16(p) | (lds_u16(p + 2) << 16);
}
__device__ __forceinline__ float lds_f16(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}
// Byte k of w (0..255) as a float minus bias, exactly: 2^23 + b is a float whose low
// mantissa bits are b, so one byte-permute and one add replace a slow int-to-float.
template <int K>
__device__ __forceinline__ float byte_f(uint32_t w, float bias) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440 + K)) - (8388608.0f + bias);
}

struct DecodeQ4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
    const float d = lds_f16(b);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = lds_u32(b + 2 + 4 * i), lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
      v[4 * i + 0] = byte_f<0>(lo, 8.0f) * d, v[4 * i + 16] = byte_f<0>(hi, 8.0f) * d;
      v[4 * i + 1] = byte_f<1>(lo, 8.0f) * d, v[4 * i + 17] = byte_f<1>(hi, 8.0f) * d;
      v[4 * i + 2] = byte_f<2>(lo, 8.0f) * d, v[4 * i + 18] = byte_f<2>(hi, 8.0f) * d;
      v[4 * i + 3] = byte_f<3>(lo, 8.0f) * d, v[4 * i + 19] = byte_f<3>(hi, 8.0f) * d;
    }
  }
};

struct DecodeQ4_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
    const float d = lds_f16(b), m = lds_f16(b + 2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // q * d + m: q * d is exact, so fma == ref's mul + add
      const uint32_t w = lds_u32(b + 4 + 4 * i), lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
      v[4 * i + 0] = fmaf(byte_f<0>(lo, 0.f), d, m), v[4 * i + 16] = fmaf(byte_f<0>(hi, 0.f), d, m);
      v[4 * i + 1] = fmaf(byte_f<1>(lo, 0.f), d, m), v[4 * i + 17] = fmaf(byte_f<1>(hi, 0.f), d, m);
      v[4 * i + 2] = fmaf(byte_f<2>(lo, 0.f), d, m), v[4 * i + 18] = fmaf(byte_f<2>(hi, 0.f), d, m);
      v[4 * i + 3] = fmaf(byte_f<3>(lo, 0.f), d, m), v[4 * i + 19] = fmaf(byte_f<3>(hi, 0.f), d, m);
    }
  }
};

struct DecodeQ5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
    const float d = lds_f16(b);
    const uint32_t qh = lds_u32(b + 2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = lds_u32(b + 6 + 4 * i);
      // bit j of qh is element j's fifth bit, bit j + 16 element j + 16's (j < 16)
      const uint32_t h0 = qh >> (4 * i), h1 = qh >> (4 * i + 16);
      const uint32_t lo = (w & 0x0F0F0F0Fu) | ((h0 << 4) & 0x10u) | ((h0 << 11) & 0x1000u) |
                          ((h0 << 18) & 0x100000u) | ((h0 << 25) & 0x10000000u);
      const uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | ((h1 << 4) & 0x10u) | ((h1 << 11) & 0x1000u) |
                          ((h1 << 18) & 0x100000u) | ((h1 << 25) & 0x10000000u);
      v[4 * i + 0] = byte_f<0>(lo, 16.f) * d, v[4 * i + 16] = byte_f<0>(hi, 16.f) * d;
      v[4 * i + 1] = byte_f<1>(lo, 16.f) * d, v[4 * i + 17] = byte_f<1>(hi, 16.f) * d;
      v[4 * i + 2] = byte_f<2>(lo, 16.f) * d, v[4 * i + 18] = byte_f<2>(hi, 16.f) * d;
      v[4 * i + 3] = byte_f<3>(lo, 16.f) * d, v[4 * i + 19] = byte_f<3>(hi, 16.f) * d;
    }
  }
};

struct DecodeQ8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
    const float d = lds_f16(b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t w = lds_u32(b + 2 + 4 * i) ^ 0x80808080u;  // int8 + 128
      v[4 * i + 0] = byte_f<0>(w, 128.f) * d, v[4 * i + 1] = byte_f<1>(w, 128.f) * d;
      v[4 * i + 2] = byte_f<2>(w, 128.f) * d, v[4 * i + 3] = byte_f<3>(w, 128.f) * d;
    }
  }
};

// 6-bit scale and min j of a Q4_K / Q5_K super-block (ggml get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, float* sc, float* m) {
  if (j < 4) {
    *sc = (float)(q[j] & 63), *m = (float)(q[j + 4] & 63);
  } else {
    *sc = (float)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

struct DecodeQ4_K {  // unit j: qs[32 * (j / 2) ..][32], low nibbles for even j
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  static __device__ __forceinline__ void unit(const uint8_t* b, int j, float (&v)[32]) {
    float sc, mn;
    scale_min_k4(j, b + 4, &sc, &mn);
    const float d = lds_f16(b) * sc, m = lds_f16(b + 2) * mn;
    const uint4* q = reinterpret_cast<const uint4*>(b + 16 + 32 * (j / 2));
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 r = q[c];
      const uint32_t ws[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t n = (ws[i] >> shift) & 0x0F0F0F0Fu;
        v[16 * c + 4 * i + 0] = fmaf(d, byte_f<0>(n, 0.f), -m);
        v[16 * c + 4 * i + 1] = fmaf(d, byte_f<1>(n, 0.f), -m);
        v[16 * c + 4 * i + 2] = fmaf(d, byte_f<2>(n, 0.f), -m);
        v[16 * c + 4 * i + 3] = fmaf(d, byte_f<3>(n, 0.f), -m);
      }
    }
  }
};

struct DecodeQ5_K {  // as Q4_K, plus bit j of qh[l] as element l's fifth bit
  static constexpr int kBlockElems = 256, kBlockBytes = 176;
  static __device__ __forceinline__ void unit(const uint8_t* b, int j, float (&v)[32]) {
    float sc, mn;
    scale_min_k4(j, b + 4, &sc, &mn);
    const float d = lds_f16(b) * sc, m = lds_f16(b + 2) * mn;
    const uint4* qh = reinterpret_cast<const uint4*>(b + 16);
    const uint4* q = reinterpret_cast<const uint4*>(b + 48 + 32 * (j / 2));
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 r = q[c], h = qh[c];
      const uint32_t ws[4] = {r.x, r.y, r.z, r.w}, hs[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t n = ((ws[i] >> shift) & 0x0F0F0F0Fu) | (((hs[i] >> j) & 0x01010101u) << 4);
        v[16 * c + 4 * i + 0] = fmaf(d, byte_f<0>(n, 0.f), -m);
        v[16 * c + 4 * i + 1] = fmaf(d, byte_f<1>(n, 0.f), -m);
        v[16 * c + 4 * i + 2] = fmaf(d, byte_f<2>(n, 0.f), -m);
        v[16 * c + 4 * i + 3] = fmaf(d, byte_f<3>(n, 0.f), -m);
      }
    }
  }
};

// Unit j = 4 * n + k: elements 128 n + 32 k + l of ggml's loop (q1..q4 = k), l < 32.
struct DecodeQ6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static __device__ __forceinline__ void unit(const uint8_t* b, int j, float (&v)[32]) {
    const int n = j / 4, k = j % 4;
    const uint8_t* ql = b + 64 * n + 32 * (k & 1);
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * n + 2 * k);
    const float d = lds_f16(b + 208);
    const float d0 = d * (float)sc[0], d1 = d * (float)sc[1];  // (d * scale) * q, as ggml
    const int lshift = 4 * (k >> 1), hshift = 2 * k;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t q = ((lds_u32(ql + 4 * i) >> lshift) & 0x0F0F0F0Fu) |
                         (((lds_u32(qh + 4 * i) >> hshift) & 0x03030303u) << 4);
      const float ds = i < 4 ? d0 : d1;
      v[4 * i + 0] = ds * byte_f<0>(q, 32.f), v[4 * i + 1] = ds * byte_f<1>(q, 32.f);
      v[4 * i + 2] = ds * byte_f<2>(q, 32.f), v[4 * i + 3] = ds * byte_f<3>(q, 32.f);
    }
  }
};

struct DecodeF32 {
  static constexpr int kBlockElems = 32, kBlockBytes = 128;
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 r = reinterpret_cast<const float4*>(b)[i];
      v[4 * i] = r.x, v[4 * i + 1] = r.y, v[4 * i + 2] = r.z, v[4 * i + 3] = r.w;
    }
  }
};

template <bool kBf16>
struct DecodeHalf {
  static constexpr int kBlockElems = 32, kBlockBytes = 64;
  static __device__ __forceinline__ float elem(uint32_t w, int hi) {
    if (kBf16) return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16));
    return __half2float(__ushort_as_half((unsigned short)(hi ? (w >> 16) : (w & 0xffffu))));
  }
  static __device__ __forceinline__ void unit(const uint8_t* b, int, float (&v)[32]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 r = reinterpret_cast<const uint4*>(b)[i];
      const uint32_t ws[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) v[8 * i + 2 * k] = elem(ws[k], 0), v[8 * i + 2 * k + 1] = elem(ws[k], 1);
    }
  }
};

}  // namespace tkv::kernels::cuda_detail
