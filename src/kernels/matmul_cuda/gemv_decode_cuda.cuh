// Per-format decode of one 32-element unit of a GGUF weight row from shared memory,
// mirroring quant/ggml_dequant.h. Quantized types give the unit's integer quants packed four
// to a word plus its scales (value_i = d_half * (q_i - kOffset) + m, the ref's arithmetic
// factored), for dp4a against int8 activations; float types give 32 fp32 values. A unit is
// a whole 32-element block, a 32-element sub-block of a K-quant super-block, or 32 floats.
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
// How the activations are quantized for a weight format, as the CPU matmul does it
// (kernels/matmul/act_quant.h, llama.cpp's choice): so GPU and CPU dot products see the
// same int8 inputs and scales. kQ8_0: per 32, d = fp16(amax / 127); kQ8_1: the same d
// plus s = fp16(d_f32 * sum(q)) for the formats with a min; kQ8_K: per 256, d = 1 / iscale
// with iscale = -127 / (the first element of largest magnitude), fp32.
enum class ActMode { kQ8_0, kQ8_1, kQ8_K };

// Scales of one quantized unit: element i's value is d0 * (q_i - kOffset) + m for i < 16,
// d1 * (q_i - kOffset) + m for i >= 16 (only Q6_K's halves differ).
struct UnitScale {
  float d0, d1, m;
};

// Q5_0's fifth bits: bit k of h goes to bit 4 of byte k (k < 4).
__device__ __forceinline__ uint32_t spread4(uint32_t h) {
  return ((h << 4) & 0x10u) | ((h << 11) & 0x1000u) | ((h << 18) & 0x100000u) |
         ((h << 25) & 0x10000000u);
}

struct DecodeQ4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kOffset = 8;
  static constexpr bool kQuant = true, kMin = false;
  static constexpr ActMode kAct = ActMode::kQ8_0;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int, uint32_t (&q)[8]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // qs[j] low nibble: element j, high: element j + 16
      const uint32_t w = lds_u32(b + 2 + 4 * i);
      q[i] = w & 0x0F0F0F0Fu, q[4 + i] = (w >> 4) & 0x0F0F0F0Fu;
    }
    const float d = lds_f16(b);
    return {d, d, 0.f};
  }
};

struct DecodeQ4_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 20, kOffset = 0;
  static constexpr bool kQuant = true, kMin = true;
  static constexpr ActMode kAct = ActMode::kQ8_1;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int, uint32_t (&q)[8]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = lds_u32(b + 4 + 4 * i);
      q[i] = w & 0x0F0F0F0Fu, q[4 + i] = (w >> 4) & 0x0F0F0F0Fu;
    }
    const float d = lds_f16(b);
    return {d, d, lds_f16(b + 2)};
  }
};

struct DecodeQ5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22, kOffset = 16;
  static constexpr bool kQuant = true, kMin = false;
  static constexpr ActMode kAct = ActMode::kQ8_0;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int, uint32_t (&q)[8]) {
    const uint32_t qh = lds_u32(b + 2);  // bit j: element j's fifth bit
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = lds_u32(b + 6 + 4 * i);
      q[i] = (w & 0x0F0F0F0Fu) | spread4(qh >> (4 * i));
      q[4 + i] = ((w >> 4) & 0x0F0F0F0Fu) | spread4(qh >> (4 * i + 16));
    }
    const float d = lds_f16(b);
    return {d, d, 0.f};
  }
};

struct DecodeQ8_0 {  // signed bytes, dp4a's signed operand as they are
  static constexpr int kBlockElems = 32, kBlockBytes = 34, kOffset = 0;
  static constexpr bool kQuant = true, kMin = false;
  static constexpr ActMode kAct = ActMode::kQ8_0;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int, uint32_t (&q)[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = lds_u32(b + 2 + 4 * i);
    const float d = lds_f16(b);
    return {d, d, 0.f};
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

// Unit j of a Q4_K / Q5_K super-block: d * sc_j * q - dmin * m_j (both products exact).
__device__ __forceinline__ UnitScale k4_scale(const uint8_t* b, int j) {
  float sc, mn;
  scale_min_k4(j, b + 4, &sc, &mn);
  const float d = lds_f16(b) * sc;
  return {d, d, -(lds_f16(b + 2) * mn)};
}

struct DecodeQ4_K {  // unit j: qs[32 * (j / 2) ..][32], low nibbles for even j
  static constexpr int kBlockElems = 256, kBlockBytes = 144, kOffset = 0;
  static constexpr bool kQuant = true, kMin = true;
  static constexpr ActMode kAct = ActMode::kQ8_K;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int j, uint32_t (&q)[8]) {
    const uint4* qs = reinterpret_cast<const uint4*>(b + 16 + 32 * (j / 2));
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 r = qs[c];
      q[4 * c + 0] = (r.x >> shift) & 0x0F0F0F0Fu, q[4 * c + 1] = (r.y >> shift) & 0x0F0F0F0Fu;
      q[4 * c + 2] = (r.z >> shift) & 0x0F0F0F0Fu, q[4 * c + 3] = (r.w >> shift) & 0x0F0F0F0Fu;
    }
    return k4_scale(b, j);
  }
};

struct DecodeQ5_K {  // as Q4_K, plus bit j of qh[l] as element l's fifth bit
  static constexpr int kBlockElems = 256, kBlockBytes = 176, kOffset = 0;
  static constexpr bool kQuant = true, kMin = true;
  static constexpr ActMode kAct = ActMode::kQ8_K;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int j, uint32_t (&q)[8]) {
    const uint4* qh = reinterpret_cast<const uint4*>(b + 16);
    const uint4* qs = reinterpret_cast<const uint4*>(b + 48 + 32 * (j / 2));
    const int shift = 4 * (j & 1);
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint4 r = qs[c], h = qh[c];
      const uint32_t ws[4] = {r.x, r.y, r.z, r.w}, hs[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        q[4 * c + i] = ((ws[i] >> shift) & 0x0F0F0F0Fu) | (((hs[i] >> j) & 0x01010101u) << 4);
    }
    return k4_scale(b, j);
  }
};

// Unit j = 4 * n + k: elements 128 n + 32 k + l of ggml's loop (q1..q4 = k), l < 32; the
// two 16-element halves have their own scales.
struct DecodeQ6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210, kOffset = 32;
  static constexpr bool kQuant = true, kMin = false;
  static constexpr ActMode kAct = ActMode::kQ8_K;
  static __device__ __forceinline__ UnitScale unit(const uint8_t* b, int j, uint32_t (&q)[8]) {
    const int n = j / 4, k = j % 4;
    const uint8_t* ql = b + 64 * n + 32 * (k & 1);
    const uint8_t* qh = b + 128 + 32 * n;
    const int lshift = 4 * (k >> 1), hshift = 2 * k;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      q[i] = ((lds_u32(ql + 4 * i) >> lshift) & 0x0F0F0F0Fu) |
             (((lds_u32(qh + 4 * i) >> hshift) & 0x03030303u) << 4);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192 + 8 * n + 2 * k);
    const float d = lds_f16(b + 208);
    return {d * (float)sc[0], d * (float)sc[1], 0.f};
  }
};

struct DecodeF32 {
  static constexpr int kBlockElems = 32, kBlockBytes = 128;
  static constexpr bool kQuant = false;
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
  static constexpr bool kQuant = false;
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
      for (int k = 0; k < 4; ++k)
        v[8 * i + 2 * k] = elem(ws[k], 0), v[8 * i + 2 * k + 1] = elem(ws[k], 1);
    }
  }
};

}  // namespace tkv::kernels::cuda_detail
