// The tensor-core decode's epilogue (decode_turbo_mma_cuda.cu, its only includer): the
// block's partial (its consumer warps' online-softmax states merged through shared memory),
// the per-row count of finished partitions, and the merge by the row's last block with the
// deferred inverse FWHT and the bf16 store. Design: docs/cuda-kernels.md ("Merge").
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/attention_cuda/decode_common.cuh"
#include "quant/kv_math.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kD = 128;    // head_dim of the tensor-core path
constexpr int kHeads = 4;  // query heads per block (one GQA tile)

// Barrier of the 4 consumer warps (named barrier 1: modes 1/2's producer warp has exited).
template <int CT>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(CT) : "memory");
}

// Where dim e of head h sits in its row of the cross-warp merge buffer: bits 1-3 of e XOR
// (e bits 5-6, h bit 1), so each of write_partial's stores (lane (r, c): dim 16r + 2j +
// (c >> 1), head 2(c & 1)) hits 32 distinct banks (plain rows: 8-way conflicts), and 32
// consecutive dims of one head stay a permutation of one bank row for the reads.
__device__ __forceinline__ int acc_pos(int e, int h) {
  return e ^ (((e >> 5) & 3) << 1) ^ (((h >> 1) & 1) << 3);
}
// kNatural (the bf16 tiles, mma_bf16_tiles.cuh: lane (r, c) stores dim 16j + r + 8(c >> 1)):
// e XOR 16 (h bit 1) gives the 32 lanes of a store distinct banks.
template <bool kNatural>
__device__ __forceinline__ int merge_pos(int e, int h) {
  if constexpr (kNatural) return e ^ (((h >> 1) & 1) << 4);
  return acc_pos(e, h);
}

// Writes the block's partial (m, l, acc) for its 4 heads: warps merged through shared memory.
// m[i], l[i]: running max and this lane's weight sum of head hA + i (score-lane layout).
// acc: turbo's dims 16r + 2j (+1 in rows r+8), or with kNatural bf16's 16j + r (+8).
template <int kCW, bool kNatural = false, int kCT = 32 * kCW>
__device__ __forceinline__ void write_partial(const DecodeLaunch& a, uint8_t* smem,
                                              const float (&acc)[8][4], const float (&m)[2],
                                              float (&l)[2], int seq, int hq0, int part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane >> 2, c = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // over the 8 token rows (lanes c, c^2 hold the same values)
    l[i] += __shfl_xor_sync(kFull, l[i], 4);
    l[i] += __shfl_xor_sync(kFull, l[i], 8);
    l[i] += __shfl_xor_sync(kFull, l[i], 16);
  }
  float* s_acc = reinterpret_cast<float*>(smem);  // [kCW][kHeads][kD], dims at merge_pos
  float* s_ml = s_acc + kCW * kHeads * kD;        // [kCW][kHeads][2]
  {  // columns 2(c&1), +1 are heads (c >= 2 duplicate c - 2): lanes c < 2 store even dims, c >= 2
     // odd
    const int hA = 2 * (c & 1), odd = c >> 1;
    float* h0 = s_acc + (warp * kHeads + hA) * kD;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int e = kNatural ? 16 * j + r + 8 * odd : 16 * r + 2 * j + odd;
      h0[merge_pos<kNatural>(e, hA)] = odd ? acc[j][2] : acc[j][0];
      h0[kD + merge_pos<kNatural>(e, hA + 1)] = odd ? acc[j][3] : acc[j][1];
    }
  }
  if (lane < 2) {  // lane c holds heads 2c, 2c+1
#pragma unroll
    for (int i = 0; i < 2; ++i)
      s_ml[2 * (warp * kHeads + 2 * lane + i)] = m[i],
                                           s_ml[2 * (warp * kHeads + 2 * lane + i) + 1] = l[i];
  }
  consumer_sync<kCT>();
  for (int idx = threadIdx.x; idx < kHeads * kD; idx += kCT) {
    const int h = idx / kD, e = idx % kD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kCW; ++w) mx = fmaxf(mx, s_ml[2 * (w * kHeads + h)]);
    float sum = 0.0f, lsum = 0.0f;
#pragma unroll
    for (int w = 0; w < kCW; ++w) {
      const float mw = s_ml[2 * (w * kHeads + h)];
      const float cw = mw == -INFINITY ? 0.0f : fast_exp2(mw - mx);
      sum += s_acc[(w * kHeads + h) * kD + merge_pos<kNatural>(e, h)] * cw;
      lsum += s_ml[2 * (w * kHeads + h) + 1] * cw;
    }
    const int64_t rec = ((int64_t)seq * a.p.n_heads + hq0 + h) * a.plan.n_parts + part;
    a.ws_acc[rec * kD + e] = sum;
    if (e == 0) a.ws_ml[2 * rec] = mx, a.ws_ml[2 * rec + 1] = lsum;
  }
}

// The merged, still rotated row of one head (lane: dims 4 lane + i) to the output: the
// inverse FWHT (quant::fwht_stages order: pairs in a lane, then across lanes by
// shuffles), sign ⊙ /√D, 1/l, bf16.
__device__ __forceinline__ void store_rotated_head(const DecodeLaunch& a, float (&x)[4], float l,
                                                   int seq, int head, int lane) {
#pragma unroll
  for (int st = 1; st < 4; st <<= 1) {  // stages 1, 2: pairs inside the lane
    float y[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      y[i] = (i & st) ? quant::add_rn(x[i ^ st], -x[i]) : quant::add_rn(x[i], x[i ^ st]);
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = y[i];
  }
#pragma unroll
  for (int st = 4; st < kD; st <<= 1) {  // stages 4..64: lane ^ st/4
    const bool upper = (lane * 4) & st;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float other = __shfl_xor_sync(kFull, x[i], st / 4);
      x[i] = upper ? quant::add_rn(other, -x[i]) : quant::add_rn(x[i], other);
    }
  }
  uint16_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float u = quant::mul_rn(x[i], quant::mul_rn(a.inv_sqrt, a.signs[4 * lane + i]));
    o[i] = f32_to_bf16(l > 0.0f ? u / l : 0.0f);
  }
  uint2 packed;
  packed.x = o[0] | (uint32_t)o[1] << 16, packed.y = o[2] | (uint32_t)o[3] << 16;
  *reinterpret_cast<uint2*>(a.p.out + ((int64_t)seq * a.p.n_heads + head) * kD + 4 * lane) = packed;
}

// The merged row of one head (lane: dims 4 lane + i) to the output: store_rotated_head, or
// with kRotated false (a bf16 cache) 1/l, bf16.
template <bool kRotated = true>
__device__ __forceinline__ void store_head(const DecodeLaunch& a, float (&x)[4], float l, int seq,
                                           int head, int lane) {
  if constexpr (!kRotated) {
    uint2 packed;
    packed.x = f32_to_bf16(l > 0.0f ? x[0] / l : 0.0f) |
               (uint32_t)f32_to_bf16(l > 0.0f ? x[1] / l : 0.0f) << 16;
    packed.y = f32_to_bf16(l > 0.0f ? x[2] / l : 0.0f) |
               (uint32_t)f32_to_bf16(l > 0.0f ? x[3] / l : 0.0f) << 16;
    *reinterpret_cast<uint2*>(a.p.out + ((int64_t)seq * a.p.n_heads + head) * kD + 4 * lane) =
        packed;
  } else {
    store_rotated_head(a, x, l, seq, head, lane);
  }
}

// The merge of decode_reduce_cuda.cu for the block's 4 heads, run by the last partition
// block of the (sequence, head tile) to finish (threadFenceReduction pattern: partials
// stored, fence, count; the block that counts n_used reads them all through L2). Warp h
// merges head hq0 + h, lane 4 dims: partitions in index order (deterministic whichever
// block is last), then store_head<kRotated>.
template <int kCW, bool kRotated = true, int kCT = 32 * kCW>
__device__ __forceinline__ void merge_if_last(const DecodeLaunch& a, float* s_w, int w_cap, int seq,
                                              int hq0, int seq_len) {
  __shared__ int s_last;
  const int n_used = (seq_len + a.plan.partition_tokens - 1) / a.plan.partition_tokens;
  consumer_sync<kCT>();  // every consumer's partial stores issued
  if (threadIdx.x == 0) {
    // One acq_rel count: release of the block's partial stores (after the barrier: cumulative),
    // acquire of the others' for the merge (the barrier below passes it on). inc wraps n_used - 1
    // to 0: the last block leaves the counter zero for the next call.
    unsigned* ctr = reinterpret_cast<unsigned*>(a.counters) + (int64_t)seq * gridDim.y + blockIdx.y;
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;\n"
                 : "=r"(old)
                 : "l"(ctr), "r"((unsigned)n_used - 1u)
                 : "memory");
    s_last = old == (unsigned)n_used - 1u;
  }
  consumer_sync<kCT>();
  if (!s_last || threadIdx.x >= 32 * kHeads) return;  // warp h merges head h
  const int h = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rec0 = ((int64_t)seq * a.p.n_heads + hq0 + h) * a.plan.n_parts;
  const float2* ml = reinterpret_cast<const float2*>(a.ws_ml) + rec0;
  const float4* pa = reinterpret_cast<const float4*>(a.ws_acc + rec0 * kD) + lane;
  constexpr int kBatch =
      16;  // acc loads in flight per lane; the sums stay in index order (deterministic)
  if (n_used <= kBatch) {  // one L2 trip: every (m, l) and acc row loaded before the max is known
    const float2 mlp = lane < n_used ? __ldcg(&ml[lane]) : make_float2(-INFINITY, 0.0f);
    float4 v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      v[i] = i < n_used ? __ldcg(pa + (int64_t)i * (kD / 4)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float mx = mlp.x;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
    const float w = mlp.x == -INFINITY ? 0.0f : exp2f(mlp.x - mx);
    float l = mlp.y * w;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(kFull, l, off);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const float wi = __shfl_sync(kFull, w, i);
      if (i < n_used)
        acc.x += v[i].x * wi, acc.y += v[i].y * wi, acc.z += v[i].z * wi, acc.w += v[i].w * wi;
    }
    float x[4] = {acc.x, acc.y, acc.z, acc.w};  // dims 4 lane + i
    store_head<kRotated>(a, x, l, seq, hq0 + h, lane);
    return;
  }
  // (m, l) of every partition read once (one lane per partition) into shared memory (the
  // free pipeline: w_cap floats per head, so w_cap / 2 partitions; past that from L2), the
  // weights 2^(m_p - M) in place of m, l summed by lanes, then the warp.
  s_w += h * w_cap;
  const int cap = w_cap / 2;
  float2* s_ml2 = reinterpret_cast<float2*>(s_w);
  float mx = -INFINITY;
  for (int p = lane; p < n_used; p += 32) {
    const float2 mlp = __ldcg(&ml[p]);
    if (p < cap) s_ml2[p] = mlp;
    mx = fmaxf(mx, mlp.x);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
  float l = 0.0f;
  for (int p = lane; p < n_used; p += 32) {
    const float2 mlp = p < cap ? s_ml2[p] : __ldcg(&ml[p]);
    const float w = mlp.x == -INFINITY ? 0.0f : exp2f(mlp.x - mx);
    if (p < cap) s_ml2[p].x = w;
    l += mlp.y * w;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(kFull, l, off);
  __syncwarp();
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int p0 = 0; p0 < n_used; p0 += kBatch) {
    float4 v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      v[i] = p0 + i < n_used ? __ldcg(pa + (int64_t)(p0 + i) * (kD / 4))
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int p = p0 + i;
      if (p >= n_used) break;
      float w;
      if (p < cap) {
        w = s_ml2[p].x;
      } else {
        const float mp = __ldcg(&ml[p].x);
        w = mp == -INFINITY ? 0.0f : exp2f(mp - mx);
      }
      acc.x += v[i].x * w, acc.y += v[i].y * w, acc.z += v[i].z * w, acc.w += v[i].w * w;
    }
  }
  float x[4] = {acc.x, acc.y, acc.z, acc.w};  // dims 4 lane + i
  store_head<kRotated>(a, x, l, seq, hq0 + h, lane);
}

}  // namespace
}  // namespace tkv::kernels::cuda_detail
