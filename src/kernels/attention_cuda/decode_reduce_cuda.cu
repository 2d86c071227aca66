// Reduce of the split-KV decode: merges the fp32 partials (m, l, acc) of every
// partition of a (sequence, query head), applies turbo's deferred inverse FWHT
// (quant/fwht.h butterflies and order, sign ⊙ H(.)/√D) once per output row,
// scales by 1/l and writes bf16 (RNE). Empty sequences give zeros.
#include "kernels/attention_cuda/decode_common.cuh"
#include "quant/kv_math.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kSmemParts = 1024;  // partitions whose weights are staged in shared memory

__global__ void __launch_bounds__(kMaxHeadDim) decode_reduce_kernel(const DecodeLaunch a, bool unrotate) {
  __shared__ float s_x[kMaxHeadDim];
  __shared__ float s_w[kSmemParts];  // partition weight 2^(m_p - M)
  __shared__ float s_red[kMaxHeadDim / 32];
  const int head = blockIdx.x, seq = blockIdx.y, e = threadIdx.x, nt = blockDim.x;
  const int d = a.p.kv.format.head_dim, n_parts = a.plan.n_parts;
  const int seq_len = a.p.kv.seq_lens[seq];
  const int used = (seq_len + a.plan.partition_tokens - 1) / a.plan.partition_tokens;
  const int64_t rec0 = ((int64_t)seq * a.p.n_heads + head) * n_parts;
  const float* ml = a.ws_ml + 2 * rec0;
  // Block max of the partition maxima (all threads load in parallel).
  float mx = -INFINITY;
  for (int p = e; p < used; p += nt) mx = fmaxf(mx, ml[2 * p]);
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
  if (e % 32 == 0) s_red[e / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < nt / 32; ++w) mx = fmaxf(mx, s_red[w]);
  for (int p = e; p < used && p < kSmemParts; p += nt) s_w[p] = ml[2 * p] == -INFINITY ? 0.0f : exp2f(ml[2 * p] - mx);
  __syncthreads();
  float acc = 0.0f, l = 0.0f;
  const float* part_acc = a.ws_acc + rec0 * d + e;
#pragma unroll 4
  for (int p = 0; p < used; ++p) {
    const float w = p < kSmemParts ? s_w[p] : (ml[2 * p] == -INFINITY ? 0.0f : exp2f(ml[2 * p] - mx));
    l += ml[2 * p + 1] * w;
    acc += part_acc[(int64_t)p * d] * w;
  }
  if (unrotate) {
    for (int h = 1; h < d; h <<= 1) {  // stage order and pairing of quant::fwht_stages
      s_x[e] = acc;
      __syncthreads();
      const float other = s_x[e ^ h];
      __syncthreads();
      acc = (e & h) ? quant::add_rn(other, -acc) : quant::add_rn(acc, other);
    }
    acc = quant::mul_rn(acc, quant::mul_rn(a.inv_sqrt, a.signs[e]));
  }
  const float y = l > 0.0f ? acc / l : 0.0f;
  a.p.out[((int64_t)seq * a.p.n_heads + head) * d + e] = f32_to_bf16(y);
}

}  // namespace

cudaError_t launch_decode_reduce(const DecodeLaunch& a, bool unrotate, cudaStream_t stream) {
  const dim3 grid(a.p.n_heads, a.p.n_seqs);
  decode_reduce_kernel<<<grid, a.p.kv.format.head_dim, 0, stream>>>(a, unrotate);
  return cudaGetLastError();
}

}  // namespace tkv::kernels::cuda_detail
