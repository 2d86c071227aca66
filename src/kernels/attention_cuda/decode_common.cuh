// Shared skeleton of the paged decode kernels (turbo and bf16): one block per
// (sequence, kv head, GQA head tile, partition). Tiles of tokens stream through a
// kStages-deep cp.async pipeline in shared memory (bytes in flight without
// registers); a thread owns one 16-element chunk of head_dim for one token slot and
// holds q and the V accumulator of its chunk for every query head of the tile, so
// each K/V byte is read once per tile. Online softmax in fp32 (exp2 domain), fp32
// partials to the workspace; spec turboquant-codec.md §4.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/attention_cuda/attention_cuda_launch.h"

namespace tkv::kernels::cuda_detail {

constexpr int kChunk = 16;  // head_dim elements per thread
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kUnroll = 4;                      // tokens per thread per tile
constexpr int kStages = 3;                      // pipeline depth (tiles in shared memory)
constexpr int kTileLanes = kThreads * kUnroll;  // tokens per tile * lanes per token
constexpr int kMaxPlanes = 5;
constexpr int kMaxHeadDim = 512;
constexpr unsigned kFull = 0xffffffffu;

// Loads CB bytes from shared memory at p (aligned to the largest power of two
// dividing CB: planes are dense rows of CB-byte chunks) as little-endian words.
template <int CB>
__device__ __forceinline__ void load_chunk(const uint8_t* p, uint32_t (&w)[(CB + 3) / 4]) {
  if constexpr (CB % 16 == 0) {
#pragma unroll
    for (int i = 0; i < CB / 16; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (CB == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else if constexpr (CB == 4) {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  } else {  // 2, 6, 10 bytes: 2-byte aligned
#pragma unroll
    for (int i = 0; i < (CB + 3) / 4; ++i) w[i] = 0;
#pragma unroll
    for (int i = 0; i < CB / 2; ++i)
      w[i / 2] |= (uint32_t) reinterpret_cast<const uint16_t*>(p)[i] << (16 * (i % 2));
  }
}

// Bits [i*B, i*B+B) of the LSB-first stream in w (i a constant after unrolling).
template <int B, int NW>
__device__ __forceinline__ uint32_t stream_field(const uint32_t (&w)[NW], int i) {
  const int bit = i * B, wi = bit / 32, sh = bit % 32;
  uint32_t x = w[wi] >> sh;
  if (sh + B > 32) x = __funnelshift_r(w[wi], w[wi + 1], sh);
  return x & ((1u << B) - 1u);
}

// 2^x by the SFU (ex2.approx.ftz: relative error ~2^-22, -inf -> +0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float h2f(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

// Asynchronous global -> shared copy of n (4, 8 or 16) bytes.
__device__ __forceinline__ void cp_async(void* dst, const void* src, int n) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
  if (n == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
  } else if (n == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(src));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src));
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Hopper bulk tensor copies (TMA) completing on an mbarrier in shared memory; the
// tensor maps are __grid_constant__ kernel parameters (generic addresses here).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
// After the inits, before any thread or the copy engine uses the barriers (then a __syncthreads).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Spins until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, "
        "1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_prefetch(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}
__device__ __forceinline__ void tma_load_2d(void* dst, const void* map, int c0, int c1,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}
// Plain (non-tensor) bulk copy of bytes (a multiple of 16; both addresses 16-byte aligned).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const void* map, int c0, int c1, int c2,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// The planes a codec streams (K data, V data, then turbo's K scale, K zero, V scale).
struct TokenCtx {
  const uint8_t* plane[kMaxPlanes];
  int row_bytes[kMaxPlanes];  // per (token, kv head) row
  int n_planes;
  float k_offset;     // 2^23 (+128 for signed keys): the magic-number int->float bias
  uint32_t k_xor;     // 0x80808080 for signed 8-bit keys (two's complement -> biased)
  const float* cent;  // [2^v_bits] shared-memory centroid table
};

// Bytes of one pipeline stage: tokens per tile times the row bytes of every plane.
__host__ __device__ inline int stage_bytes(const int (&row_bytes)[kMaxPlanes], int n_planes,
                                           int lanes) {
  int sum = 0;
#pragma unroll
  for (int p = 0; p < kMaxPlanes; ++p) sum += p < n_planes ? row_bytes[p] : 0;
  return kTileLanes / lanes * sum;
}

// Issues the copies of tile tokens [t0, t0 + tile) (clipped at t_end) into stage.
__device__ __forceinline__ void issue_tile(const TokenCtx& c, uint8_t* stage, int tile, int t0,
                                           int t_end, const int32_t* pages, int ps_shift,
                                           int page_size, int n_kv, int kvh) {
  const int tpt = kThreads / tile;  // threads per token
  const int tok = threadIdx.x / tpt, sub = threadIdx.x % tpt, t = t0 + tok;
  if (t >= t_end) return;
  const int64_t row = paged_row(pages[t >> ps_shift], n_kv, kvh, page_size, t & (page_size - 1));
  int off = 0;
#pragma unroll
  for (int p = 0; p < kMaxPlanes; ++p) {  // unrolled: ctx stays in registers
    if (p >= c.n_planes) break;
    const int rb = c.row_bytes[p], unit = rb % 16 == 0 ? 16 : rb % 8 == 0 ? 8 : 4;
    const uint8_t* src = c.plane[p] + row * rb;
    uint8_t* dst = stage + off + tok * rb;
    for (int u = sub * unit; u < rb; u += tpt * unit) cp_async(dst + u, src + u, unit);
    off += tile * rb;
  }
}

// Flash-decoding partial for one (seq, kv head, head tile, partition). Codec provides
// Raw, load(raw, ctx, stage, tok, tile, j), qk() and pv(); see decode_turbo_cuda.cu.
template <class Codec, int TILE>
__device__ __forceinline__ void decode_partial(const DecodeLaunch& a, const TokenCtx& ctx,
                                               uint8_t* smem) {
  const PagedKv& kv = a.p.kv;
  const int part = blockIdx.x, seq = blockIdx.z;
  const int gqa = a.p.n_heads / kv.format.n_kv_heads, n_tiles_h = gqa / TILE;
  const int kvh = blockIdx.y / n_tiles_h, hq0 = kvh * gqa + (blockIdx.y % n_tiles_h) * TILE;
  const int seq_len = kv.seq_lens[seq], t_begin = part * a.plan.partition_tokens;
  if (t_begin >= seq_len) return;  // uniform per block: the reduce ignores this partition
  const int t_end = min(seq_len, t_begin + a.plan.partition_tokens);
  const int d = kv.format.head_dim(), lanes = d / kChunk, slots = 32 / lanes,
            tile = kTileLanes / lanes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slot = lane / lanes, j = lane % lanes;
  const int32_t* pages = kv.seq_pages(seq);
  const int ps_shift = __ffs(kv.format.page_size) - 1;
  const int sbytes = stage_bytes(ctx.row_bytes, ctx.n_planes, lanes);
  const int n_tiles = (t_end - t_begin + tile - 1) / tile;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles)
      issue_tile(ctx, smem + s * sbytes, tile, t_begin + s * tile, t_end, pages, ps_shift,
                 kv.format.page_size, kv.format.n_kv_heads, kvh);
    cp_async_commit();
  }

  float q[TILE][kChunk], acc[TILE][kChunk], m[TILE], l[TILE];
#pragma unroll
  for (int h = 0; h < TILE; ++h) {
    const int64_t q_off = ((int64_t)seq * a.p.n_heads + hq0 + h) * d + j * kChunk;
    if (a.p.q_f32) {  // fp32 q (DecodeCudaParams::q_f32)
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        q[h][i] = __ldg(a.p.q_f32 + q_off + i) * a.q_scale;
        acc[h][i] = 0.0f;
      }
      m[h] = -INFINITY, l[h] = 0.0f;
      continue;
    }
    const uint4* qp = reinterpret_cast<const uint4*>(a.p.q + q_off);
    const uint4 v0 = __ldg(qp), v1 = __ldg(qp + 1);
    const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const uint32_t b = (i % 2) ? (w[i / 2] & 0xffff0000u) : (w[i / 2] << 16);
      q[h][i] = __uint_as_float(b) * a.q_scale;
      acc[h][i] = 0.0f;
    }
    m[h] = -INFINITY, l[h] = 0.0f;
  }

  for (int it = 0; it < n_tiles; ++it) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile `it` landed
    __syncthreads();               // everyone's did, and everyone finished tile it-1
    const int nxt = it + kStages - 1;
    if (nxt < n_tiles)
      issue_tile(ctx, smem + (nxt % kStages) * sbytes, tile, t_begin + nxt * tile, t_end, pages,
                 ps_shift, kv.format.page_size, kv.format.n_kv_heads, kvh);
    cp_async_commit();
    const uint8_t* stage = smem + (it % kStages) * sbytes;
    // Scores of this thread's kUnroll tokens first (independent chains for ILP), one
    // softmax update for all of them, then their V.
    float s[kUnroll][TILE];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tok = u * kWarps * slots + warp * slots + slot;
      valid[u] = t_begin + it * tile + tok < t_end;  // same for all lanes of the slot
      typename Codec::Raw raw;
      Codec::load(raw, ctx, stage, tok, tile, j);
      Codec::template qk<TILE>(raw, ctx, q, s[u]);
    }
    for (int off = 1; off < lanes; off <<= 1) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int h = 0; h < TILE; ++h) s[u][h] += __shfl_xor_sync(kFull, s[u][h], off);
      }
    }
    float p[kUnroll][TILE];
#pragma unroll
    for (int h = 0; h < TILE; ++h) {
      float mx = m[h];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = valid[u] ? fmaxf(mx, s[u][h]) : mx;
      if (mx > m[h]) {  // rescale only when the running max moves (rare after warm-up)
        const float c = fast_exp2(m[h] - mx);
        l[h] *= c;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) acc[h][i] *= c;
        m[h] = mx;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        p[u][h] = valid[u] ? fast_exp2(s[u][h] - mx) : 0.0f;
        l[h] += p[u][h];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!valid[u]) continue;  // stale shared memory may hold NaN bytes
      const int tok = u * kWarps * slots + warp * slots + slot;
      typename Codec::Raw raw;
      Codec::load(raw, ctx, stage, tok, tile, j);
      Codec::template pv<TILE>(raw, ctx, p[u], acc);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline buffers become the cross-warp merge buffers

  // Merge the token slots of the warp (lane bits >= log2(lanes)), then the warps.
  for (int off = lanes; off < 32; off <<= 1) {
#pragma unroll
    for (int h = 0; h < TILE; ++h) {
      const float mo = __shfl_xor_sync(kFull, m[h], off), lo = __shfl_xor_sync(kFull, l[h], off);
      const float mx = fmaxf(m[h], mo);
      const float c1 = mx == -INFINITY ? 0.0f : fast_exp2(m[h] - mx),
                  c2 = mx == -INFINITY ? 0.0f : fast_exp2(mo - mx);
      l[h] = l[h] * c1 + lo * c2;
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        acc[h][i] = acc[h][i] * c1 + __shfl_xor_sync(kFull, acc[h][i], off) * c2;
      m[h] = mx;
    }
  }
  float* s_acc = reinterpret_cast<float*>(smem);  // [kWarps][TILE][d]
  float* s_ml = s_acc + kWarps * TILE * d;        // [kWarps][TILE][2]
  if (slot == 0) {
#pragma unroll
    for (int h = 0; h < TILE; ++h) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) s_acc[(warp * TILE + h) * d + j * kChunk + i] = acc[h][i];
      if (j == 0) s_ml[2 * (warp * TILE + h)] = m[h], s_ml[2 * (warp * TILE + h) + 1] = l[h];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < TILE * d; idx += kThreads) {
    const int h = idx / d, e = idx % d;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_ml[2 * (w * TILE + h)]);
    float sum = 0.0f, lsum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = s_ml[2 * (w * TILE + h)];
      const float c = mw == -INFINITY ? 0.0f : fast_exp2(mw - mx);
      sum += s_acc[(w * TILE + h) * d + e] * c;
      lsum += s_ml[2 * (w * TILE + h) + 1] * c;
    }
    const int64_t rec = ((int64_t)seq * a.p.n_heads + hq0 + h) * a.plan.n_parts + part;
    a.ws_acc[rec * d + e] = sum;
    if (e == 0) a.ws_ml[2 * rec] = mx, a.ws_ml[2 * rec + 1] = lsum;
  }
}

// Dynamic shared memory of a decode block: the pipeline, or the merge buffers if larger.
__host__ __device__ inline int decode_smem_bytes(const int (&row_bytes)[kMaxPlanes], int n_planes,
                                                 int d, int tile_heads) {
  const int pipe = kStages * stage_bytes(row_bytes, n_planes, d / kChunk);
  const int merge = kWarps * tile_heads * (d + 2) * 4;
  return pipe > merge ? pipe : merge;
}

}  // namespace tkv::kernels::cuda_detail
