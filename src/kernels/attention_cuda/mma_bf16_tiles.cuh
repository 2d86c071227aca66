// bf16 cache on the tensor-core decode (decode_turbo_mma_cuda.cu, its only includer; KB =
// VB = 16), and the ldmatrix both caches' tiles use: Q·K and P·V of a warp's 16 tokens by mma.sync
// m16n8k16 bf16 with fp32 accumulation, straight from the stage's rows (ldmatrix, ldmatrix.trans),
// no conversion. Stage planes: K and V each [2 halves][kTok][128 bytes] (dims 0-63, 64-127),
// 16-byte unit u of token t's half at u ^ (t & 7) (TMA's 128-byte swizzle on 1024-aligned halves,
// or the cp.async address), so the 8 rows of every ldmatrix matrix hit distinct banks. Lane layout
// as the turbo tiles (mma_merge.cuh's write_partial, softmax_step): scores s[0..1] = token r, heads
// hA = 2(c&1), hA+1; s[2..3] = token r+8 (B columns 4-7 repeat heads 0-3, so lanes c and c^2 hold
// the same values); acc[j] = dims 16j + r (c0, c1) and 16j + 8 + r (c2, c3) of heads hA, hA+1 (the
// natural order, unlike turbo's 16r + 2j).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/attention_cuda/decode_common.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4], const void* p) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(s));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&a)[4], const void* p) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(s));
}

// Address of 16-byte unit u (0..15: dims 8u..8u+7) of token t in a bf16 stage plane.
template <int kTok>
__device__ __forceinline__ const uint8_t* bf16_unit(const uint8_t* plane, int t, int u) {
  return plane + (u >> 3) * (kTok * 128) + t * 128 + (((u & 7) ^ (t & 7)) << 4);
}

// q as the B operand of Q·K: k-step kk (dims 16kk..16kk+15), lane (r, c) holds head r&3's
// dims 16kk + 2c, +1 (b[kk][0]) and 16kk + 8 + 2c, +1 (b[kk][1]) as bf16x2.
struct QFragBf16 {
  uint32_t b[8][2];
};

__device__ __forceinline__ QFragBf16 load_q_bf16(const DecodeLaunch& a, int seq, int hq0,
                                                 int lane) {
  const int r = lane >> 2, c = lane & 3;
  const uint32_t* qrow =
      reinterpret_cast<const uint32_t*>(a.p.q + ((int64_t)seq * a.p.n_heads + hq0 + (r & 3)) * 128);
  QFragBf16 qf;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
    qf.b[kk][0] = __ldg(qrow + 8 * kk + c), qf.b[kk][1] = __ldg(qrow + 8 * kk + 4 + c);
  return qf;
}

// Unscaled scores of the warp's 16 tokens at tw (rows of the K plane kpl).
template <int kTok>
__device__ __forceinline__ void qk_tile_bf16(float (&s)[4], const QFragBf16& qf, const uint8_t* kpl,
                                             int tw, int lane) {
  // ldmatrix rows: lane L gives token (L&7) + 8((L>>3)&1), unit 2kk + (L>>4): a0..a3 = tokens
  // r / r+8 × dims 2c.. / 8+2c.. of the k-step.
  const int lt = tw + (lane & 7) + 8 * ((lane >> 3) & 1), lu = lane >> 4;
  s[0] = s[1] = s[2] = s[3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t af[4];
    ldmatrix_x4(af, bf16_unit<kTok>(kpl, lt, 2 * kk + lu));
    mma_bf16_16816(s, af, qf.b[kk][0], qf.b[kk][1]);
  }
}

// acc += V^T P for the warp's 16 tokens: m-tile j = dims 16j..16j+15, A = V^T by
// ldmatrix.trans (matrices: tokens 0-7 / 8-15 × dims +0-7 / +8-15), B = P (pb0, pb1 as
// softmax_step makes them, bf16). Tokens past n_valid (a clipped tile's stale rows, or a
// page's unwritten slots, which may hold NaN) are zeroed in A: P = 0 alone would not clear a NaN.
template <int kTok>
__device__ __forceinline__ void pv_tile_bf16(float (&acc)[8][4], const uint8_t* vpl, int tw,
                                             int n_valid, uint32_t pb0, uint32_t pb1, int lane) {
  const int c = lane & 3;
  const int lt = tw + (lane & 7) + 8 * (lane >> 4), lu = (lane >> 3) & 1;
  uint32_t keep[2] = {0xffffffffu, 0xffffffffu};  // a0/a1: tokens 2c, 2c+1; a2/a3: 2c+8, 2c+9
  if (n_valid < 16) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
      keep[i] = (2 * c + 8 * i < n_valid ? 0x0000ffffu : 0u) |
                (2 * c + 8 * i + 1 < n_valid ? 0xffff0000u : 0u);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    uint32_t af[4];
    ldmatrix_x4_trans(af, bf16_unit<kTok>(vpl, lt, 2 * j + lu));
    // .trans of matrices (tokens 0-7, dims +0-7), (0-7, +8-15), (8-15, +0-7), (8-15, +8-15)
    // = a0 (dim r, tokens 2c..), a1 (dim 8 + r), a2 (dim r, tokens 8 + 2c..), a3
    af[0] &= keep[0], af[1] &= keep[0], af[2] &= keep[1], af[3] &= keep[1];
    mma_bf16_16816(acc[j], af, pb0, pb1);
  }
}

}  // namespace
}  // namespace tkv::kernels::cuda_detail
