// Fused decode attention over the paged bf16 cache: turbokv's own baseline, the
// same kernel skeleton as the turbo decode (decode_common.cuh) with bf16 rows
// (32 bytes per 16-element chunk) and no rotation.
#include "kernels/attention_cuda/decode_common.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

struct Bf16Codec {
  static constexpr int kBytes = kChunk * 2;
  struct Raw {
    uint32_t k[kBytes / 4];
    uint32_t v[kBytes / 4];
  };

  static __device__ __forceinline__ float elem(const uint32_t (&w)[kBytes / 4], int i) {
    return __uint_as_float((i % 2) ? (w[i / 2] & 0xffff0000u) : (w[i / 2] << 16));
  }

  static __device__ __forceinline__ void load(Raw& r, const TokenCtx& c, const uint8_t* stage,
                                              int tok, int tile, int j) {
    const int rb = c.row_bytes[0];
    load_chunk<kBytes>(stage + tok * rb + j * kBytes, r.k);
    load_chunk<kBytes>(stage + tile * rb + tok * rb + j * kBytes, r.v);
  }

  template <int TILE>
  static __device__ __forceinline__ void qk(const Raw& r, const TokenCtx&,
                                            const float (&q)[TILE][kChunk], float (&s)[TILE]) {
#pragma unroll
    for (int h = 0; h < TILE; ++h) s[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float k = elem(r.k, i);
#pragma unroll
      for (int h = 0; h < TILE; ++h) s[h] = fmaf(q[h][i], k, s[h]);
    }
  }

  template <int TILE>
  static __device__ __forceinline__ void pv(const Raw& r, const TokenCtx&, const float (&p)[TILE],
                                            float (&acc)[TILE][kChunk]) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float v = elem(r.v, i);
#pragma unroll
      for (int h = 0; h < TILE; ++h) acc[h][i] = fmaf(p[h], v, acc[h][i]);
    }
  }
};

template <int TILE, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) decode_bf16_kernel(const DecodeLaunch a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const PagedKv& kv = a.p.kv;
  const int rb = kv.format.head_dim() * 2;
  const TokenCtx ctx{{kv.k_data, kv.v_data}, {rb, rb}, 2, 0.0f, 0u, nullptr};
  decode_partial<Bf16Codec, TILE>(a, ctx, smem);
}

template <int TILE, int MINB>
cudaError_t launch_tile(const DecodeLaunch& a, dim3 grid, cudaStream_t stream) {
  const int d = a.p.kv.format.head_dim();
  const int rows[kMaxPlanes] = {2 * d, 2 * d, 0, 0, 0};
  const int smem = decode_smem_bytes(rows, 2, d, TILE);
  static int raised = 0;  // the opt-in above 48 KiB, once per instantiation (and size)
  if (smem > 48 * 1024 && smem > raised) {
    const cudaError_t e = cudaFuncSetAttribute(decode_bf16_kernel<TILE, MINB>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    raised = smem;
  }
  decode_bf16_kernel<TILE, MINB><<<grid, kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_decode_bf16(const DecodeLaunch& a, cudaStream_t stream) {
  const int gqa = a.p.n_heads / a.p.kv.format.n_kv_heads;
  const dim3 grid(a.plan.n_parts, a.p.kv.format.n_kv_heads * (gqa / a.plan.query_heads_per_block),
                  a.p.n_seqs);
  switch (a.plan.query_heads_per_block) {
    case 4:
      if (a.p.min_blocks_per_sm == 3 && a.p.kv.format.head_dim() == 128)
        return launch_tile<4, 3>(a, grid, stream);
      return launch_tile<4, 1>(a, grid, stream);
    case 2:
      return launch_tile<2, 1>(a, grid, stream);
    default:
      return launch_tile<1, 1>(a, grid, stream);
  }
}

}  // namespace tkv::kernels::cuda_detail
