// Reduce of the split-KV decode: merges the fp32 partials (m, l, acc) of every
// partition of a (sequence, query head), applies turbo's deferred inverse FWHT
// (quant/fwht.h butterflies and order, sign ⊙ H(.)/√D) once per output row,
// scales by 1/l and writes bf16 (RNE). Empty sequences give zeros. Partitions are
// summed by up to 8 thread groups per element (parallel load streams).
#include "kernels/attention_cuda/decode_common.cuh"
#include "quant/kv_math.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kSmemParts = 1024;  // partitions whose weights are staged in shared memory
constexpr int kMaxGroups = 8;  // partition groups per block (threads = head_dim * groups <= 1024)

// Block (head, seq), head_dim * G threads: thread (g, e) sums the partitions p = g mod G
// of element e (G independent load streams per element), then group 0 adds the G
// partial sums in g order (deterministic), runs the FWHT and writes.
__global__ void __launch_bounds__(1024)
    decode_reduce_kernel(const DecodeLaunch a, bool unrotate, int groups) {
  __shared__ float s_x[kMaxHeadDim];
  __shared__ float s_w[kSmemParts];  // partition weight 2^(m_p - M)
  __shared__ float s_red[32];
  __shared__ float s_acc[kMaxGroups - 1][kMaxHeadDim];
  __shared__ float s_l[kMaxGroups - 1];
  const int head = blockIdx.x, seq = blockIdx.y, nt = blockDim.x;
  const int d = a.p.kv.format.head_dim(), n_parts = a.plan.n_parts;
  const int e = threadIdx.x % d, g = threadIdx.x / d;
  const int seq_len = a.p.kv.seq_lens[seq];
  const int used = (seq_len + a.plan.partition_tokens - 1) / a.plan.partition_tokens;
  const int64_t rec0 = ((int64_t)seq * a.p.n_heads + head) * n_parts;
  const float* ml = a.ws_ml + 2 * rec0;
  // Block max of the partition maxima (all threads load in parallel).
  float mx = -INFINITY;
  for (int p = threadIdx.x; p < used; p += nt) mx = fmaxf(mx, ml[2 * p]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
  if (threadIdx.x % 32 == 0) s_red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < nt / 32; ++w) mx = fmaxf(mx, s_red[w]);
  for (int p = threadIdx.x; p < used && p < kSmemParts; p += nt)
    s_w[p] = ml[2 * p] == -INFINITY ? 0.0f : exp2f(ml[2 * p] - mx);
  __syncthreads();
  float acc = 0.0f, l = 0.0f;
  const float* part_acc = a.ws_acc + rec0 * d + e;
#pragma unroll 4
  for (int p = g; p < used; p += groups) {
    const float w =
        p < kSmemParts ? s_w[p] : (ml[2 * p] == -INFINITY ? 0.0f : exp2f(ml[2 * p] - mx));
    l += ml[2 * p + 1] * w;
    acc += part_acc[(int64_t)p * d] * w;
  }
  if (g > 0) {
    s_acc[g - 1][e] = acc;
    if (e == 0) s_l[g - 1] = l;
  }
  __syncthreads();
  if (g == 0) {
    for (int i = 0; i + 1 < groups; ++i) acc += s_acc[i][e], l += s_l[i];
  }
  if (unrotate) {
    for (int h = 1; h < d; h <<= 1) {  // stage order and pairing of quant::fwht_stages
      if (g == 0) s_x[e] = acc;
      __syncthreads();
      const float other = s_x[e ^ h];
      __syncthreads();
      acc = (e & h) ? quant::add_rn(other, -acc) : quant::add_rn(acc, other);
    }
    acc = quant::mul_rn(acc, quant::mul_rn(a.inv_sqrt, a.signs[e]));
  }
  const float y = l > 0.0f ? acc / l : 0.0f;
  const int64_t o = ((int64_t)seq * a.p.n_heads + head) * d + e;
  if (g == 0) {
    if (a.p.out_f32)
      a.p.out_f32[o] = y;
    else
      a.p.out[o] = f32_to_bf16(y);
  }
}

}  // namespace

cudaError_t launch_decode_reduce(const DecodeLaunch& a, bool unrotate, cudaStream_t stream) {
  const int d = a.p.kv.format.head_dim();
  int groups = 1024 / d < kMaxGroups ? 1024 / d : kMaxGroups;
  if (a.plan.n_parts < groups) groups = a.plan.n_parts < 1 ? 1 : a.plan.n_parts;
  const dim3 grid(a.p.n_heads, a.p.n_seqs);
  decode_reduce_kernel<<<grid, d * groups, 0, stream>>>(a, unrotate, groups);
  return cudaGetLastError();
}

}  // namespace tkv::kernels::cuda_detail
