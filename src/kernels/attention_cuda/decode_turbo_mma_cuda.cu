// Tensor-core fast path of the fused TurboQuant decode (k8v3/k8v4/k4v3/k4v2; a bf16 cache by
// the tiles of mma_bf16_tiles.cuh; head_dim 128, GQA tiles of 4 query heads): Q·K by int8
// mma.sync m16n8k32 on the stored key bytes and q as 16-bit integers in hi/lo int8 columns
// (group scale/zero applied after: s = Σ_g s_g (Σ idx q + z_g Σ q)), P·V by mma.sync m16n8k16
// f16 with fp16 P and centroid·scale V (rotated domain, one FWHT in the merge). A warp's 16
// tokens of one kv head are contiguous rows of a page in every plane (head-major pages,
// paged_kv.h): a producer warp brings K/V to shared memory by TMA bulk tensor copies and the
// scale rows (16 x 8 bytes per plane) by plain bulk copies on per-stage mbarriers (page_size >=
// 16; else cp.async); the last partition block of each (sequence, head tile) merges the
// partials (no reduce kernel). Error model and tolerance: tests/cuda/attention_cuda_test.cc;
// layout and design: docs/cuda-kernels.md. Formats: src/quant/turbo_k.h, turbo_v.h, bitpack.h.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "kernels/attention_cuda/decode_common.cuh"
#include "kernels/attention_cuda/mma_bf16_tiles.cuh"
#include "kernels/attention_cuda/mma_merge.cuh"
#include "kernels/attention_cuda/tma_maps.h"
#include "quant/kv_math.h"

namespace tkv::kernels::cuda_detail {
namespace {

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) {
  return *reinterpret_cast<uint32_t*>(&h);
}
__device__ __forceinline__ __half2 bits_h2(uint32_t u) {
  return *reinterpret_cast<__half2*>(&u);
}

// Q·K by mma.sync m16n8k32 s32.u8.s8 (s8.s8 for signed keys): A = K of the warp's 16
// tokens × one 32-group (ldmatrix.x4 straight from the swizzled stage, no conversion),
// B = q as 16-bit integers Q = round(q·2^e) = 256·hi + lo split into two int8 columns:
// columns 0-3 = hi of heads 0-3, 4-7 = lo. Integer group sums are exact; per group
// s_g = ks_g·(Σ idx·Q + kz_g·Σ_g Q) in fp32, hi and lo lanes (c, c^2) summed at the end.
// C lane (r, c): tokens r, r+8; columns 2c, 2c+1 = heads hA = 2(c&1), hA+1 (hi if c < 2).
struct QFrag {
  uint32_t b[4][2];  // [group][k half]: 4 int8 of the lane's column (head r&3, hi or lo part)
  float sqz[4][2];   // [group][head hA/hB]: Σ_g Q / 256 on hi lanes, 0 on lo lanes
  float kw;          // 256 on hi lanes, 1 on lo lanes
  float smul[2];     // q_scale / 2^e of heads hA, hB
};

// KB = 8: the lane's k slots 4c..4c+3 / 16+4c.. are dims 32g + 4c + {0..3} / 32g + 16 + 4c +
// {0..3}. KB = 4 (two dims per key byte, low nibble first): slot 4c+j is dim 32g + 8c + 2j and slot
// 16+4c+j dim 32g + 8c + 2j + 1, the order qk_tile's nibble split gives the K side.
template <int KB>
__device__ __forceinline__ QFrag load_q(const DecodeLaunch& a, int seq, int hq0, int lane) {
  const int r = lane >> 2, c = lane & 3, h = r & 3;
  const uint16_t* qrow = a.p.q + ((int64_t)seq * a.p.n_heads + hq0 + h) * kD;
  float v[4][8];  // [group][k slots 4c + {0..3}, 16 + 4c + {0..3}]
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    if constexpr (KB == 8) {
      const uint2 w0 = __ldg(reinterpret_cast<const uint2*>(qrow + 32 * g + 4 * c));
      const uint2 w1 = __ldg(reinterpret_cast<const uint2*>(qrow + 32 * g + 16 + 4 * c));
      const uint32_t ws[4] = {w0.x, w0.y, w1.x, w1.y};
#pragma unroll
      for (int i = 0; i < 8; ++i)
        v[g][i] = __uint_as_float(i % 2 ? ws[i / 2] & 0xffff0000u : ws[i / 2] << 16);
    } else {
      const uint4 w =
          __ldg(reinterpret_cast<const uint4*>(qrow + 32 * g + 8 * c));  // dims 8c..8c+7
      const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[g][j] = __uint_as_float(ws[j] << 16), v[g][4 + j] = __uint_as_float(ws[j] & 0xffff0000u);
    }
  }
  float mx = 0.0f;
#pragma unroll
  for (int g = 0; g < 4; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) mx = fmaxf(mx, fabsf(v[g][i]));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 16));  // the 8 lanes of head h
  int ex = 0;
  frexpf(mx, &ex);                                             // mx in [2^(ex-1), 2^ex)
  const int e = mx > 0.0f ? max(-100, min(100, 14 - ex)) : 0;  // max |q|·2^e in [2^13, 2^14)
  const float f = ldexpf(1.0f, e);
  const bool hi_part = r < 4;  // this lane's B column is head h's hi part (else lo)
  QFrag qf;
  float sq[4];
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    int sum = 0;
    uint32_t packed[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int qi = __float2int_rn(v[g][i] * f);      // |qi| <= 2^14
      const int qh = (qi + 128) >> 8;                  // [-64, 64]
      const int part = hi_part ? qh : qi - (qh << 8);  // lo in [-128, 127]
      sum += qi;
      packed[i / 4] |= (uint32_t)(part & 0xff) << (8 * (i % 4));
    }
    qf.b[g][0] = packed[0], qf.b[g][1] = packed[1];
    sum += __shfl_xor_sync(kFull, sum, 1);
    sum += __shfl_xor_sync(kFull, sum, 2);  // Σ over the group's 32 dims (lanes c = 0..3 of row r)
    sq[g] = (float)sum;                     // exact: |sum| <= 2^19
  }
  // Score lane c holds heads hA = 2(c&1), hA+1; head h's values live in lane 4h.
  const int hA = 2 * (c & 1), srcA = 4 * hA, srcB = 4 * (hA + 1);
  const bool hi_col = c < 2;
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    const float sa = __shfl_sync(kFull, sq[g], srcA), sb = __shfl_sync(kFull, sq[g], srcB);
    qf.sqz[g][0] = hi_col ? sa * (1.0f / 256.0f) : 0.0f;
    qf.sqz[g][1] = hi_col ? sb * (1.0f / 256.0f) : 0.0f;
  }
  const float smul = a.q_scale / f;
  qf.smul[0] = __shfl_sync(kFull, smul, srcA), qf.smul[1] = __shfl_sync(kFull, smul, srcB);
  qf.kw = hi_col ? 256.0f : 1.0f;
  return qf;
}

template <bool kSigned>
__device__ __forceinline__ void imma16832(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (kSigned) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
  }
}

// Scores of the warp's 16 tokens at tw (K rows swizzled as the stage layout below), lane layout
// above: s[0..1] = token r, heads hA, hB; s[2..3] = token r+8. Unscaled by smul, unmasked.
// ksc, kzr: k scale / zero rows of the stage, SR bytes apart.
// KB = 4: rows of 64 bytes (16-byte unit g = group g, TMA's 64-byte swizzle: unit u of
// token t at u ^ ((t >> 1) & 3)), one ldmatrix.x4 per two groups, each byte split into its
// low nibbles (k slots 4c..) and high nibbles (16 + 4c..), unsigned.
template <bool kSigned, int SR, int KB>
__device__ __forceinline__ void qk_tile(float (&s)[4], const QFrag& qf, const uint8_t* kpl,
                                        const uint8_t* ksc, const uint8_t* kzr, int tw, int lane) {
  const int r = lane >> 2;
  constexpr int kKr = kD * KB / 8;
  // ldmatrix rows: lane L gives token (L&7) + 8((L>>3)&1), 16-byte unit 2g + (L>>4).
  const int lt = tw + (lane & 7) + 8 * ((lane >> 3) & 1), lu = lane >> 4;
  const uint8_t* lrow = kpl + lt * kKr;
  uint32_t k4[2][4];  // KB = 4: the ldmatrix.x4 of groups 0-1 and 2-3
  if constexpr (KB == 4) {
#pragma unroll
    for (int gg = 0; gg < 2; ++gg)
      ldmatrix_x4(k4[gg], lrow + (((2 * gg + lu) ^ ((lt >> 1) & 3)) << 4));
  }
  const uint2 zs0 = *reinterpret_cast<const uint2*>(ksc + (tw + r) * SR);  // k scales, token r
  const uint2 zs1 = *reinterpret_cast<const uint2*>(ksc + (tw + r + 8) * SR);
  const uint2 zz0 = *reinterpret_cast<const uint2*>(kzr + (tw + r) * SR);  // k zeros
  const uint2 zz1 = *reinterpret_cast<const uint2*>(kzr + (tw + r + 8) * SR);
  const float2 ks0[2] = {__half22float2(bits_h2(zs0.x)), __half22float2(bits_h2(zs0.y))};
  const float2 ks1[2] = {__half22float2(bits_h2(zs1.x)), __half22float2(bits_h2(zs1.y))};
  const float2 kz0[2] = {__half22float2(bits_h2(zz0.x)), __half22float2(bits_h2(zz0.y))};
  const float2 kz1[2] = {__half22float2(bits_h2(zz1.x)), __half22float2(bits_h2(zz1.y))};
  s[0] = s[1] = s[2] = s[3] = 0.0f;
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    uint32_t af[4];
    if constexpr (KB == 8) {
      ldmatrix_x4(af, lrow + (((2 * g + lu) ^ (lt & 7)) << 4));
    } else {
      const uint32_t m0 = k4[g >> 1][2 * (g & 1)],
                     m1 = k4[g >> 1][2 * (g & 1) + 1];  // tokens r, r+8
      af[0] = m0 & 0x0f0f0f0fu, af[1] = m1 & 0x0f0f0f0fu;
      af[2] = (m0 >> 4) & 0x0f0f0f0fu, af[3] = (m1 >> 4) & 0x0f0f0f0fu;
    }
    int d[4];
    imma16832<kSigned>(d, af, qf.b[g][0], qf.b[g][1]);
    const float sc0 =
        g & 1 ? ks0[g >> 1].y : ks0[g >> 1].x;  // kw (a power of two) applied after: exact
    const float sc1 = g & 1 ? ks1[g >> 1].y : ks1[g >> 1].x;
    const float z0 = g & 1 ? kz0[g >> 1].y : kz0[g >> 1].x,
                z1 = g & 1 ? kz1[g >> 1].y : kz1[g >> 1].x;
    s[0] = fmaf(sc0, fmaf(z0, qf.sqz[g][0], (float)d[0]), s[0]);
    s[1] = fmaf(sc0, fmaf(z0, qf.sqz[g][1], (float)d[1]), s[1]);
    s[2] = fmaf(sc1, fmaf(z1, qf.sqz[g][0], (float)d[2]), s[2]);
    s[3] = fmaf(sc1, fmaf(z1, qf.sqz[g][1], (float)d[3]), s[3]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s[i] *= qf.kw;
    s[i] += __shfl_xor_sync(kFull, s[i], 2);  // hi + lo columns
  }
}

// Load modes of a stage's planes: 0 = every plane by cp.async, two threads per token (any
// page size), one __syncthreads per tile; 1 = a fifth, producer warp issues K and V as TMA
// page boxes and the three 128-byte scale runs of each warp's 16 tokens as 1-D bulk copies
// (page_size >= 16) on per-stage "full" mbarriers; the 4 consumer warps free a stage on its
// "empty" mbarrier (no block-wide sync in the loop, no issue code in the consumers);
// 2 = mode 1 for page_size >= 64: lane 0 of a producer warp copies its 4 slots (64 tokens of
// one page) by one box or run per plane, 5 copies per 64 tokens instead of per 16 (measured:
// -10 % at long contexts). A mode of its own so mode 1's code stays as it was (the page-size
// test in mode 1's loop cost page 16 5-8 %).
// kSt = 3 pipeline stages (4 measured no faster: docs/bench/cuda.md runs 11, 14).
// Stage s of a block's dynamic shared memory: K [kTok][128] (16-byte units XOR-swizzled
// by token, unit u of token t at u ^ (t & 7), by TMA's 128-byte swizzle on a 1024-aligned
// region or by the copy address), V [kTok][kVr], then k scale, k zero, v scale [kTok][kSr];
// then the mbarriers (modes 1, 2: full[stage], empty[stage]).
// CW consumer warps per block (16 tokens each per stage; 16 / CW blocks per SM), modes 1
// and 2 add CW / 4 producer warps (4 warp slots each).
// KB = VB = 16: a bf16 cache (mma_bf16_tiles.cuh): K and V planes [2][kTok][128], no scale
// planes, no pair table, one block per SM (8 consumer warps: 3 stages of 64 KB).
template <int KB, int VB, int kMode, int CW, int ST = 3>
struct MmaLayout {
  static constexpr bool kBf = KB == 16;
  static constexpr int kSt = ST, kKr = kD * KB / 8;  // K row bytes
  static constexpr int kCW = CW, kCT = 32 * CW, kPW = CW / 4, kTok = 16 * CW,
                       kMinBlocks = kBf ? 1 : 16 / CW;
  static constexpr int kThreads = kMode != 0 ? kCT + 32 * kPW : kCT;
  static constexpr int kVr = kD * VB / 8, kSr = kBf ? 0 : 8;
  static constexpr int kK = kTok * kKr, kV = kTok * kVr, kS = kTok * kSr;  // one plane of one stage
  __host__ __device__ static constexpr int slot_bytes() {
    return 16 * (kKr + kVr + 3 * kSr);
  }  // 16 tokens, all planes
  __host__ __device__ static constexpr int k_off(int s) { return s * kK; }
  __host__ __device__ static constexpr int v_off(int s) { return kSt * kK + s * kV; }
  __host__ __device__ static constexpr int s_off(int s) { return kSt * (kK + kV) + s * 3 * kS; }
  static constexpr int kBar = kSt * (kK + kV + 3 * kS);
  static constexpr int kTab =
      kBf ? 1 : 1 << (2 * (kBf ? 1 : VB));  // pair-table entries (bf16: none, 1 declared)
  static constexpr int kTabBytes = kBf ? 0 : 4 * kTab;  // the pair table (static shared memory)
  static constexpr int kBytes = kBar + 16 * kSt;
  // Per-block share of the SM's 228 KB at kMinBlocks blocks (1 KB of it reserved per block).
  static constexpr int kBudget = 233472 / kMinBlocks - 1024 - kTabBytes;
  // Room to align the K stages to 1024 bytes where it fits (TMA modes); else the base must be.
  static constexpr int kSlack = kMode == 0 ? 0 : kBytes + 1024 <= kBudget ? 1024 : 0;
  static constexpr int kDyn = kBytes + kSlack;
  static_assert(kCW * kHeads * (kD + 2) * 4 <= kBar, "merge buffers fit in the pipeline");
  static_assert(kDyn <= kBudget, "kMinBlocks blocks per SM");
};

struct TmaMaps {
  const CUtensorMap& k;
  const CUtensorMap& v;
};

// TMA copies of kRows consecutive tokens from t in one page (a warp slot of 16, or with
// page_size >= 64 the 4 slots of a producer warp: the maps' box has kRows rows) into stage
// planes kst/vst/sst at token row tok, completing on bar (kRows / 16 slot_bytes() expected).
template <class L, int kRows>
__device__ __forceinline__ void issue_copies(const PagedKv& kv, const TmaMaps& tm, uint8_t* kst,
                                             uint8_t* vst, uint8_t* sst, int tok, int t,
                                             int32_t page, int kvh, uint64_t* bar) {
  const int off = t & (kv.format.page_size - 1);     // a multiple of kRows
  const int pk = page * kv.format.n_kv_heads + kvh;  // (page, kv head) block of page_size rows
  if constexpr (L::kBf) {  // each plane as two 128-byte halves (the 128-byte swizzle's widest box)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tma_load_3d(kst + h * (L::kTok * 128) + tok * 128, &tm.k, 128 * h, off, pk, bar);
      tma_load_3d(vst + h * (L::kTok * 128) + tok * 128, &tm.v, 128 * h, off, pk, bar);
    }
    return;
  }
  const int64_t row = paged_row(page, kv.format.n_kv_heads, kvh, kv.format.page_size, off);
  tma_load_3d(kst + tok * L::kKr, &tm.k, 0, off, pk, bar);
  tma_load_3d(vst + tok * L::kVr, &tm.v, 0, off, pk, bar);
  bulk_load(sst + tok * L::kSr, kv.k_scale + row * 4, kRows * L::kSr, bar);
  bulk_load(sst + L::kS + tok * L::kSr, kv.k_zero + row * 4, kRows * L::kSr, bar);
  bulk_load(sst + 2 * L::kS + tok * L::kSr, kv.v_scale + row * 4, kRows * L::kSr, bar);
}

// Mode 0: copies the rows of tokens [t0, t0 + kTok) (clipped at t_end) into stage s,
// thread i copying token i / 2 (each warp copies, and later reads, only its own 16
// tokens). page: the page of this thread's token.
template <class L>
__device__ __forceinline__ void issue_cp_async_tile(const PagedKv& kv, uint8_t* smem, int s, int t0,
                                                    int t_end, int32_t page, int kvh) {
  const int tok = threadIdx.x >> 1, t = t0 + tok;
  uint8_t* kst = smem + L::k_off(s);
  uint8_t* vst = smem + L::v_off(s);
  uint8_t* sst = smem + L::s_off(s);
  if (t >= t_end) return;
  const int sub = threadIdx.x & 1;
  const int64_t row = paged_row(page, kv.format.n_kv_heads, kvh, kv.format.page_size,
                                t & (kv.format.page_size - 1));
  const uint8_t* ks = kv.k_data + row * L::kKr;
  if constexpr (L::kBf) {  // the halves layout of mma_bf16_tiles.cuh, 8 units of K and 8 of V per
                           // thread
    const uint8_t* vs = kv.v_data + row * L::kVr;
#pragma unroll
    for (int u = sub; u < 16; u += 2) {
      const int dst = (u >> 3) * (L::kTok * 128) + tok * 128 + (((u & 7) ^ (tok & 7)) << 4);
      cp_async(kst + dst, ks + 16 * u, 16);
      cp_async(vst + dst, vs + 16 * u, 16);
    }
    return;
  }
  const int kswz =
      L::kKr == 128 ? tok & 7 : (tok >> 1) & 3;  // the TMA swizzle pattern (128 / 64 bytes)
#pragma unroll
  for (int u = sub; u < L::kKr / 16; u += 2)
    cp_async(kst + tok * L::kKr + ((u ^ kswz) << 4), ks + 16 * u, 16);
  const uint8_t* vsrc = kv.v_data + row * L::kVr;
#pragma unroll
  for (int u = sub; u < L::kVr / 16; u += 2)
    cp_async(vst + tok * L::kVr + 16 * u, vsrc + 16 * u, 16);
  uint8_t* sdst = sst + tok * L::kSr;
  if (sub == 0) {
    cp_async(sdst, kv.k_scale + row * 4, 8);
    cp_async(sdst + L::kS, kv.k_zero + row * 4, 8);
  } else {
    cp_async(sdst + 2 * L::kS, kv.v_scale + row * 4, 8);
  }
}

// Page of this thread's token in the tile at t0 (0 past t_end): loaded a tile ahead of
// its copies, so the page-table latency is off the loop's critical path.
__device__ __forceinline__ int32_t tile_page(const int32_t* pages, int t0, int t_end,
                                             int ps_shift) {
  const int t = t0 + (threadIdx.x >> 1);
  return t < t_end ? __ldg(pages + (t >> ps_shift)) : 0;
}

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Online-softmax step for the warp's 16 tokens (scores s in qk_tile's layout, -inf =
// masked unless kNoMask: a full tile, no -inf): per head hA + i the max over the 8 token
// rows, acc/l rescaled when it moves by more than kSlack (log2 units; P then stays <=
// 2^kSlack, in fp16's range; the partial's m is its reference, not the exact max), acc
// column 2c + i being head hA + i as well; P as fp16 transposed by movmatrix into the B
// layout of the P·V mma (lane (r, c): tokens 2c, 2c+1 / +8 of head r&3); kBf16P: P as bf16
// (the bf16 cache's P·V).
template <bool kBf16P = false, bool kNoMask = false, int kSlack = 0>
__device__ __forceinline__ void softmax_step(const float (&s)[4], float (&m)[2], float (&l)[2],
                                             float (&acc)[8][4], uint32_t& pb0, uint32_t& pb1) {
  float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(kFull, mx[i], 4));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(kFull, mx[i], 8));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(kFull, mx[i], 16));
  }
  const float mn0 = fmaxf(m[0], mx[0]), mn1 = fmaxf(m[1], mx[1]);
  if constexpr (kSlack == 0) {  // spelled so that k8v3 keeps its tested PTX
    if (mn0 > m[0] ||
        mn1 > m[1]) {  // uniform over the 8 rows of a column; acc lanes are the same lanes
      const float c0 = mn0 > m[0] ? fast_exp2(m[0] - mn0) : 1.0f,
                  c1 = mn1 > m[1] ? fast_exp2(m[1] - mn1) : 1.0f;
      l[0] *= c0, l[1] *= c1;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        acc[j][0] *= c0, acc[j][1] *= c1, acc[j][2] *= c0, acc[j][3] *= c1;
      m[0] = mn0, m[1] = mn1;
    }
  } else {
    const bool up0 = mx[0] > m[0] + (float)kSlack, up1 = mx[1] > m[1] + (float)kSlack;
    if (up0 || up1) {
      const float c0 = up0 ? fast_exp2(m[0] - mn0) : 1.0f, c1 = up1 ? fast_exp2(m[1] - mn1) : 1.0f;
      l[0] *= c0, l[1] *= c1;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        acc[j][0] *= c0, acc[j][1] *= c1, acc[j][2] *= c0, acc[j][3] *= c1;
      if (up0) m[0] = mn0;
      if (up1) m[1] = mn1;
    }
  }
  float p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p[i] = kNoMask || s[i] > -INFINITY ? fast_exp2(s[i] - m[i & 1]) : 0.0f;
  l[0] += p[0] + p[2], l[1] += p[1] + p[3];
  if constexpr (kBf16P) {
    const __nv_bfloat162 b01 = __floats2bfloat162_rn(p[0], p[1]),
                         b23 = __floats2bfloat162_rn(p[2], p[3]);
    pb0 = movmatrix_trans(*reinterpret_cast<const uint32_t*>(&b01));
    pb1 = movmatrix_trans(*reinterpret_cast<const uint32_t*>(&b23));
  } else {
    pb0 = movmatrix_trans(h2_bits(__floats2half2_rn(p[0], p[1])));
    pb1 = movmatrix_trans(h2_bits(__floats2half2_rn(p[2], p[3])));
  }
}

// acc += V^T P for the warp's 16 tokens: A rows r / r+8 of m-tile j = dims 16r+2j / +1,
// k = tokens 2c, 2c+1 / 2c+8, 2c+9, values centroid[idx]·v_scale (fp16) from the pair table.
template <int VB, int SR, bool kNoMask = false>
__device__ __forceinline__ void pv_tile(float (&acc)[8][4], const uint8_t* vpl, const uint8_t* vsp,
                                        const uint32_t* tab, int tw, int n_valid, uint32_t pb0,
                                        uint32_t pb1, int lane) {
  constexpr int kVr = kD * VB / 8, kCb = 2 * VB,
                kPairBits = 2 * VB;  // row bytes, bytes of 16 dims, bits of 2
  const int r = lane >> 2, c = lane & 3;
  uint32_t w[4][(kCb + 3) / 4];
  uint32_t vs[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int t = tw + 2 * c + (u & 1) + 8 * (u >> 1);
    load_chunk<kCb>(vpl + t * kVr + kCb * r, w[u]);
    const uint32_t v = reinterpret_cast<const uint16_t*>(vsp + t * SR)[r >> 1];
    vs[u] = kNoMask || t - tw < n_valid ? v : 0u;  // stale rows of a clipped tile may hold Inf/NaN
  }
  const __half2 vab = bits_h2(vs[0] | vs[1] << 16), vcd = bits_h2(vs[2] | vs[3] << 16);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    uint32_t hv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) hv[u] = tab[stream_field<kPairBits>(w[u], j)];
    const uint32_t a0 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[0], hv[1], 0x5410)), vab));
    const uint32_t a1 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[0], hv[1], 0x7632)), vab));
    const uint32_t a2 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[2], hv[3], 0x5410)), vcd));
    const uint32_t a3 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[2], hv[3], 0x7632)), vcd));
    mma16816(acc[j], a0, a1, a2, a3, pb0, pb1);
  }
}

// Pair-table entry p: fp16x2 (centroid[p & m], centroid[p >> VB]).
template <int VB>
__device__ __forceinline__ uint32_t pair_entry(const float* centroids, int p) {
  return h2_bits(__floats2half2_rn(centroids[p & ((1 << VB) - 1)], centroids[p >> VB]));
}

// Mode 0: one __syncthreads per tile. Modes 1, 2: warps 0-3 consume, warp 4 produces: stage s
// is "full" when the producer's arrival and its copies' bytes landed, "empty" when the 4
// consumer warps arrived. Then the partial, and the merge by the row's last block.
template <int KB, int VB, int kMode, int CW>
__global__ void __launch_bounds__(MmaLayout<KB, VB, kMode, CW>::kThreads,
                                  MmaLayout<KB, VB, kMode, CW>::kMinBlocks)
    decode_turbo_mma_kernel(const DecodeLaunch a, const __grid_constant__ CUtensorMap tm_k,
                            const __grid_constant__ CUtensorMap tm_v) {
  using L = MmaLayout<KB, VB, kMode, CW>;
  constexpr int kCW = L::kCW, kCT = L::kCT, kPW = L::kPW, kTok = L::kTok, kSt = L::kSt;
  constexpr int kSr = L::kSr;
  constexpr bool kBf = L::kBf;  // a bf16 cache: mma_bf16_tiles.cuh, no pair table, no FWHT
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = smem_raw;
  if constexpr (kMode != 0) {  // TMA's 128-byte swizzle pattern needs the K stages 1024-aligned
    const uint32_t pad = (1024u - (smem_u32(smem_raw) & 1023u)) & 1023u;
    if (pad > (uint32_t)L::kSlack) __trap();
    smem += pad;
  }
  // fp16x2 (centroid[i & m], centroid[i >> VB]); static, so its lookups address [index + constant]
  constexpr int kTab = L::kTab;
  __shared__ uint32_t s_tab[kTab];
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(smem + L::kBar);  // modes 1, 2: full[stage], empty[stage]
  constexpr bool late_tab =
      kMode != 0 && !kBf;  // TMA modes: the consumers build it while the first copies fly
  if (!late_tab && !kBf)
    for (int i = threadIdx.x; i < kTab; i += L::kThreads) s_tab[i] = pair_entry<VB>(a.centroids, i);
  if constexpr (kMode !=
                0) {  // the descriptors' fetch overlaps the sequence / page-table loads below
    if (threadIdx.x == L::kCT) tma_prefetch(&tm_k), tma_prefetch(&tm_v);
  }
  // Programmatic launch: everything above ran while the previous kernel drained; its writes
  // (q, the new tokens' rows) are visible past this (a no-op in a plain launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const PagedKv& kv = a.p.kv;
  const int part = blockIdx.x, seq = blockIdx.z;
  const int gqa = a.p.n_heads / kv.format.n_kv_heads, n_tiles_h = gqa / kHeads;
  const int kvh = blockIdx.y / n_tiles_h, hq0 = kvh * gqa + (blockIdx.y % n_tiles_h) * kHeads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane >> 2;
  const int t_begin = part * a.plan.partition_tokens, ps_shift = __ffs(kv.format.page_size) - 1;
  constexpr int G =
      32 / kCW;  // a producer lane holds the slot pages of G tiles (slot kCW it + lane)
  // Block table: the producers' first 2 G tiles of slot pages load beside seq_lens (no
  // dependent read before the first copy; the index is clamped into the sequence's row and
  // entries past its end are dropped below).
  const bool table2d = kv.page_stride > 0;
  int32_t pg_early[2] = {0, 0};
  if (kMode != 0 && table2d && warp >= kCW) {
    const int32_t* row = kv.page_indices + (int64_t)seq * kv.page_stride;
#pragma unroll
    for (int i = 0; i < 2; ++i)
      pg_early[i] =
          __ldg(row + min((t_begin + 16 * (kCW * G * i + lane)) >> ps_shift, kv.page_stride - 1));
  }
  const int seq_len = kv.seq_lens[seq];
  if constexpr (kMode != 0) {  // needs no seq_len: runs while it loads
    if (threadIdx.x == 0) {
      for (int i = 0; i < kSt; ++i) mbar_init(bars + i, kPW), mbar_init(bars + kSt + i, kCW);
      mbar_init_fence();
    }
    __syncthreads();  // barriers
  }
  if (t_begin >= seq_len) {  // uniform per block: the merge ignores this partition
    if (seq_len == 0 && part == 0 &&
        threadIdx.x < kHeads * kD / 4)  // an empty sequence attends to nothing: zeros
      reinterpret_cast<uint2*>(a.p.out + ((int64_t)seq * a.p.n_heads + hq0) * kD)[threadIdx.x] =
          make_uint2(0u, 0u);
    return;
  }
  const int t_end = min(seq_len, t_begin + a.plan.partition_tokens);
  const int32_t* pages = kv.seq_pages(seq);
  const int n_tiles = (t_end - t_begin + kTok - 1) / kTok;
  const TmaMaps tm{tm_k, tm_v};
  if constexpr (kMode != 0) {
    if (warp >=
        kCW) {  // producer warp pw: its lane w < 4 issues slot 4 pw + w's copies of every tile
      const int pw = warp - kCW, slot = 4 * pw + (lane & 3), tok = 16 * slot;
      auto slot_t = [&](int tile) { return t_begin + 16 * (kCW * tile + lane); };
      auto slot_pages = [&](int tile) {
        const int t = slot_t(tile);
        return t < t_end ? __ldg(pages + (t >> ps_shift)) : 0;
      };
      int32_t pg = table2d ? (slot_t(0) < t_end ? pg_early[0] : 0) : slot_pages(0);
      int32_t pg_next = table2d ? (slot_t(G) < t_end ? pg_early[1] : 0) : slot_pages(G);
      for (int it = 0; it < n_tiles; ++it) {
        const int s = it % kSt, t0 = t_begin + it * kTok;
        if (it % G == 0 && it > 0) pg = pg_next, pg_next = slot_pages(it + G);
        const int32_t page = __shfl_sync(kFull, pg, kCW * (it % G) + slot);
        if (it >= kSt) mbar_wait(bars + kSt + s, (it / kSt - 1) & 1);  // consumers freed the stage
        const int n_slots =
            min(4, max(0, (t_end - t0 + 15) / 16 - 4 * pw));  // this warp's slots holding tokens
        if constexpr (kMode ==
                      2) {  // lane 0 copies the warp's 64 tokens (one page) whole, past t_end too
          if (lane == 0) {
            mbar_arrive_expect_tx(bars + s, n_slots > 0 ? 4 * L::slot_bytes() : 0);
            if (n_slots > 0)
              issue_copies<L, 64>(kv, tm, smem + L::k_off(s), smem + L::v_off(s),
                                  smem + L::s_off(s), tok, t0 + tok, page, kvh, bars + s);
          }
        } else {  // lane w < n_slots copies slot 4 pw + w
          if (lane == 0) mbar_arrive_expect_tx(bars + s, n_slots * L::slot_bytes());
          __syncwarp();
          if (lane < n_slots)
            issue_copies<L, 16>(kv, tm, smem + L::k_off(s), smem + L::v_off(s), smem + L::s_off(s),
                                tok, t0 + tok, page, kvh, bars + s);
        }
      }
      return;  // the consumers wait for every copy before the stages become merge buffers
    }
    if (late_tab) {  // consumers build the pair table while the first copies fly
      for (int i = threadIdx.x; i < kTab; i += kCT) s_tab[i] = pair_entry<VB>(a.centroids, i);
    }
  } else {
#pragma unroll
    for (int s = 0; s < kSt - 1; ++s) {
      if (s < n_tiles)
        issue_cp_async_tile<L>(kv, smem, s, t_begin + s * kTok, t_end,
                               tile_page(pages, t_begin + s * kTok, t_end, ps_shift), kvh);
      cp_async_commit();
    }
  }
  int32_t next_page =
      kMode != 0 ? 0 : tile_page(pages, t_begin + (kSt - 1) * kTok, t_end, ps_shift);
  const auto qf = [&] {
    if constexpr (kBf)
      return load_q_bf16(a, seq, hq0, lane);
    else
      return load_q<KB>(a, seq, hq0, lane);
  }();
  const bool k_signed = kv.format.scheme.k_signed();
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int tw = 16 * warp;
  // Lean tiles (docs/bench/cuda.md): full tiles skip the masks and -inf tests, and
  // the running max moves only by more than kLeanSlack. Measured faster for k8v4 (-2.5 %) and
  // k4v2 (-7 %), slower for k8v3 (+1 %, with 8 % fewer instructions), so k8v3 (and the bf16
  // cache) keep the exact-max code.
  constexpr bool kLean = !kBf && !(KB == 8 && VB == 3);
  constexpr int kLeanSlack = 8;
  if (late_tab) consumer_sync<kCT>();  // the pair table
  for (int it = 0; it < n_tiles; ++it) {
    const int cur = it % kSt;
    if constexpr (kMode != 0) {
      mbar_wait(bars + cur, (it / kSt) & 1);
    } else {
      cp_async_wait<kSt - 2>();  // this thread's copies of tile it
      __syncthreads();           // everyone's copies landed, and everyone finished tile it-1
      const int nxt = it + kSt - 1;
      if (nxt < n_tiles) {
        issue_cp_async_tile<L>(kv, smem, nxt % kSt, t_begin + nxt * kTok, t_end, next_page, kvh);
        next_page = tile_page(pages, t_begin + (nxt + 1) * kTok, t_end, ps_shift);
      }
      cp_async_commit();
    }
    const uint8_t* kst = smem + L::k_off(cur);
    const uint8_t* sst = smem + L::s_off(cur);
    const int n_valid = t_end - (t_begin + it * kTok + tw);  // may be <= 0
    const bool lean =
        kLean && n_valid >= 16;  // warp-uniform, the loop's steady state: no masks, no -inf tests
    float s[4];
    uint32_t pb0, pb1;
    if constexpr (kBf) {
      qk_tile_bf16<kTok>(s, qf, kst, tw, lane);
#pragma unroll
      for (int i = 0; i < 4; ++i) s[i] = r + 8 * (i >> 1) < n_valid ? s[i] * a.q_scale : -INFINITY;
      softmax_step<true>(s, m, l, acc, pb0, pb1);
      pv_tile_bf16<kTok>(acc, smem + L::v_off(cur), tw, n_valid, pb0, pb1, lane);
    } else {
      if (KB == 8 && k_signed) {
        qk_tile<true, kSr, KB>(s, qf, kst, sst, sst + L::kS, tw, lane);
      } else {
        qk_tile<false, kSr, KB>(s, qf, kst, sst, sst + L::kS, tw, lane);
      }
      if (lean) {
#pragma unroll
        for (int i = 0; i < 4; ++i) s[i] *= qf.smul[i & 1];
        softmax_step<false, true, kLeanSlack>(s, m, l, acc, pb0, pb1);
        pv_tile<VB, kSr, true>(acc, smem + L::v_off(cur), sst + 2 * L::kS, s_tab, tw, n_valid, pb0,
                               pb1, lane);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          s[i] = r + 8 * (i >> 1) < n_valid ? s[i] * qf.smul[i & 1] : -INFINITY;
        softmax_step<false, false, kLean ? kLeanSlack : 0>(s, m, l, acc, pb0, pb1);
        pv_tile<VB, kSr>(acc, smem + L::v_off(cur), sst + 2 * L::kS, s_tab, tw, n_valid, pb0, pb1,
                         lane);
      }
    }
    if constexpr (kMode != 0) {
      __syncwarp();  // the warp's reads of the stage are done
      if (lane == 0) mbar_arrive(bars + kSt + cur);
    }
  }
  if constexpr (kMode == 0) cp_async_wait<0>();
  consumer_sync<kCT>();  // the pipeline buffers become the cross-warp merge buffers
  write_partial<kCW, kBf>(a, smem, acc, m, l, seq, hq0, part);
  constexpr int kWCap = L::kBar / (4 * kHeads);  // merge weights per head in the free pipeline
  merge_if_last<kCW, !kBf>(a, reinterpret_cast<float*>(smem), kWCap, seq, hq0, seq_len);
}

bool aligned16(const void* p) {
  return ((uintptr_t)p & 15) == 0;
}

template <int KB, int VB, int kMode, int CW>
cudaError_t launch_mode(const DecodeLaunch& a, const CUtensorMap (&tm)[2], dim3 grid,
                        cudaStream_t stream) {
  using L = MmaLayout<KB, VB, kMode, CW>;
  auto* kern = decode_turbo_mma_kernel<KB, VB, kMode, CW>;
  if constexpr (L::kDyn >
                48 * 1024) {  // opt in above 48 KB (else the launch fails), all of it as shared
    static const cudaError_t attr = [kern] {
      cudaError_t e =
          cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kDyn);
      if (e == cudaSuccess)
        e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
      return e;
    }();
    if (attr != cudaSuccess) return attr;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = dim3(L::kThreads), cfg.dynamicSmemBytes = L::kDyn,
  cfg.stream = stream;
  cudaLaunchAttribute pdl[1] = {};
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  // PDL only on caller-kept counters: else a memset precedes the kernel (attention_cuda.h)
  cfg.attrs = pdl, cfg.numAttrs = a.p.programmatic_launch && a.p.merge_counters ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kern, a, tm[0], tm[1]);
}

// TKV_MMA_CFG=0 forces the cp.async kernel (benchmarking and tests only; docs/cuda-kernels.md).
bool force_cp_async() {
  static const bool f = [] {
    const char* e = std::getenv("TKV_MMA_CFG");
    return e != nullptr && std::atoi(e) == 0;
  }();
  return f;
}

}  // namespace

cudaError_t launch_decode_turbo_mma(const DecodeLaunch& a, cudaStream_t stream) {
  const PagedKv& kv = a.p.kv;
  const int gqa = a.p.n_heads / kv.format.n_kv_heads;
  const dim3 grid(a.plan.n_parts, kv.format.n_kv_heads * (gqa / kHeads), a.p.n_seqs);
  const bool bf = kv.format.is_float();
  const int vb = bf ? 16 : kv.format.scheme.v_bits, vr = kD * vb / 8,
            kr = bf ? 2 * kD : kD * kv.format.scheme.k_bits / 8;
  // TMA/bulk copies where the cache allows them (page_size >= 16, 16-byte aligned planes,
  // the encode entry point found); else the cp.async kernel.
  CUtensorMap tm[2] = {};
  const int box_rows =
      kv.format.page_size >= 64 ? 64 : 16;  // mode 2 (one page per producer warp) : mode 1
  const bool tma =
      !force_cp_async() && kv.format.page_size >= 16 && aligned16(kv.k_data) &&
      aligned16(kv.v_data) && aligned16(kv.k_scale) && aligned16(kv.k_zero) &&
      aligned16(kv.v_scale) &&
      paged_rows_map(&tm[0], kv.k_data, kr, kv.format.page_size, box_rows,
                     bf || kv.format.scheme.k_bits == 8 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                        : CU_TENSOR_MAP_SWIZZLE_64B,
                     bf ? 128 : kr) &&
      paged_rows_map(&tm[1], kv.v_data, vr, kv.format.page_size, box_rows,
                     bf ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, bf ? 128 : vr);
  static const bool verbose = std::getenv("TKV_MMA_VERBOSE") != nullptr;
  if (verbose) {
    static int printed = 0;
    if (printed++ < 4)
      std::fprintf(stderr, "[decode_turbo_mma] v%d: %s loads\n", vb, tma ? "TMA" : "cp.async");
  }
  const bool one = a.plan.mma_warps == 16 && !bf;  // bf16: 8 consumer warps, one block per SM
  auto pick = [&](auto kb, auto vb) {
    constexpr int K = decltype(kb)::value, V = decltype(vb)::value;
    if constexpr (K == 16) {  // bf16: the 8-warp kernel only
      if (!tma) return launch_mode<K, V, 0, 8>(a, tm, grid, stream);
      return box_rows == 64 ? launch_mode<K, V, 2, 8>(a, tm, grid, stream)
                            : launch_mode<K, V, 1, 8>(a, tm, grid, stream);
    } else {
      if (!tma)
        return one ? launch_mode<K, V, 0, 16>(a, tm, grid, stream)
                   : launch_mode<K, V, 0, 8>(a, tm, grid, stream);
      if (box_rows == 64)
        return one ? launch_mode<K, V, 2, 16>(a, tm, grid, stream)
                   : launch_mode<K, V, 2, 8>(a, tm, grid, stream);
      return one ? launch_mode<K, V, 1, 16>(a, tm, grid, stream)
                 : launch_mode<K, V, 1, 8>(a, tm, grid, stream);
    }
  };
  using I8 = std::integral_constant<int, 8>;
  using I4 = std::integral_constant<int, 4>;
  using I3 = std::integral_constant<int, 3>;
  using I2 = std::integral_constant<int, 2>;
  using I16 = std::integral_constant<int, 16>;
  if (bf) return pick(I16{}, I16{});
  if (kv.format.scheme.k_bits == 8) return vb == 3 ? pick(I8{}, I3{}) : pick(I8{}, I4{});
  return vb == 3 ? pick(I4{}, I3{}) : pick(I4{}, I2{});
}

}  // namespace tkv::kernels::cuda_detail
