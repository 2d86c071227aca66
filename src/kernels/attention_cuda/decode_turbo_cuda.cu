// Fused decode attention over the paged TurboQuant cache: keys dequantized in
// registers as (idx + zero) * scale (exact magic-number int->float, scale folded
// after the 16-element dot), V accumulated as centroid[idx] * scale in the rotated
// domain; the reduce kernel applies the one inverse FWHT (spec §4). Layout:
// src/quant/turbo_k.h, turbo_v.h, bitpack.h (the same LSB-first stream).
#include "kernels/attention_cuda/decode_common.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

template <int KB, int VB>
struct TurboCodec {
  static constexpr int kKBytes = kChunk * KB / 8, kVBytes = kChunk * VB / 8;
  struct Raw {
    uint32_t k[(kKBytes + 3) / 4];
    uint32_t v[(kVBytes + 3) / 4];
    uint16_t ks, kz, vs;
  };

  // Chunk j of token tok from a pipeline stage: planes [tile][row bytes] back to back.
  static __device__ __forceinline__ void load(Raw& r, const TokenCtx& c, const uint8_t* stage,
                                              int tok, int tile, int j) {
    const int kr = c.row_bytes[0], vr = c.row_bytes[1], sr = c.row_bytes[2];
    load_chunk<kKBytes>(stage + tok * kr + j * kKBytes, r.k);
    load_chunk<kVBytes>(stage + tile * kr + tok * vr + j * kVBytes, r.v);
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(stage + tile * (kr + vr));
    const int g = tok * (sr / 2) + j / 2, plane = tile * (sr / 2);  // chunk j lies in 32-group j/2
    r.ks = sc[g], r.kz = sc[plane + g], r.vs = sc[2 * plane + g];
  }

  // s[h] = scale * sum_i q[h][i] * (idx_i + zero) over this chunk. idx + zero is an
  // exact small integer: float(2^23 + biased idx) - (2^23 + bias - zero).
  template <int TILE>
  static __device__ __forceinline__ void qk(const Raw& r, const TokenCtx& c,
                                            const float (&q)[TILE][kChunk], float (&s)[TILE]) {
    const float off = __fsub_rn(c.k_offset, h2f(r.kz));
#pragma unroll
    for (int h = 0; h < TILE; ++h) s[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      uint32_t bits;
      if constexpr (KB == 8) {
        bits = __byte_perm(r.k[i / 4] ^ c.k_xor, 0x4b000000u, 0x7440 | (i % 4));
      } else {
        bits = stream_field<KB>(r.k, i) | 0x4b000000u;
      }
      const float kq = __uint_as_float(bits) - off;
#pragma unroll
      for (int h = 0; h < TILE; ++h) s[h] = fmaf(q[h][i], kq, s[h]);
    }
    const float ks = h2f(r.ks);
#pragma unroll
    for (int h = 0; h < TILE; ++h) s[h] *= ks;
  }

  // acc[h][i] += p[h] * scale * centroid[idx_i] (rotated domain).
  template <int TILE>
  static __device__ __forceinline__ void pv(const Raw& r, const TokenCtx& c, const float (&p)[TILE],
                                            float (&acc)[TILE][kChunk]) {
    const float vs = h2f(r.vs);
    float w[TILE];
#pragma unroll
    for (int h = 0; h < TILE; ++h) w[h] = p[h] * vs;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const float cv = c.cent[stream_field<VB>(r.v, i)];
#pragma unroll
      for (int h = 0; h < TILE; ++h) acc[h][i] = fmaf(w[h], cv, acc[h][i]);
    }
  }
};

template <int KB, int VB, int TILE, int MINB>
__global__ void __launch_bounds__(kThreads, MINB) decode_turbo_kernel(const DecodeLaunch a) {
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float s_cent[1 << VB];
  for (int i = threadIdx.x; i < (1 << VB); i += kThreads) s_cent[i] = a.centroids[i];
  const PagedKv& kv = a.p.kv;
  const int d = kv.format.head_dim();
  const bool sgn = KB == 8 && kv.format.scheme.k_signed();
  const TokenCtx ctx{
      {kv.k_data, kv.v_data, reinterpret_cast<const uint8_t*>(kv.k_scale),
       reinterpret_cast<const uint8_t*>(kv.k_zero), reinterpret_cast<const uint8_t*>(kv.v_scale)},
      {d * KB / 8, d * VB / 8, d / 16, d / 16, d / 16},
      5,
      sgn ? 8388736.0f : 8388608.0f,
      sgn ? 0x80808080u : 0u,
      s_cent};
  decode_partial<TurboCodec<KB, VB>, TILE>(a, ctx, smem);  // its first barrier publishes s_cent
}

template <int KB, int VB, int TILE, int MINB>
cudaError_t launch_tile(const DecodeLaunch& a, dim3 grid, cudaStream_t stream) {
  const int d = a.p.kv.format.head_dim();
  const int rows[kMaxPlanes] = {d * KB / 8, d * VB / 8, d / 16, d / 16, d / 16};
  const int smem = decode_smem_bytes(rows, 5, d, TILE);
  static int raised = 0;  // the opt-in above 48 KiB, once per instantiation (and size)
  if (smem > 48 * 1024 && smem > raised) {
    const cudaError_t e = cudaFuncSetAttribute(decode_turbo_kernel<KB, VB, TILE, MINB>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    raised = smem;
  }
  decode_turbo_kernel<KB, VB, TILE, MINB><<<grid, kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <int KB, int VB>
cudaError_t launch_kv(const DecodeLaunch& a, dim3 grid, cudaStream_t stream) {
  switch (a.plan.query_heads_per_block) {
    case 4:
      if constexpr ((KB == 8 && (VB == 3 || VB == 4)) || (KB == 4 && (VB == 3 || VB == 2))) {
        if (a.p.min_blocks_per_sm == 3 && a.p.kv.format.head_dim() == 128)
          return launch_tile<KB, VB, 4, 3>(a, grid, stream);
      }
      return launch_tile<KB, VB, 4, 1>(a, grid, stream);
    case 2:
      return launch_tile<KB, VB, 2, 1>(a, grid, stream);
    default:
      return launch_tile<KB, VB, 1, 1>(a, grid, stream);
  }
}

template <int KB>
cudaError_t launch_k(const DecodeLaunch& a, dim3 grid, cudaStream_t stream) {
  switch (a.p.kv.format.scheme.v_bits) {
    case 1:
      return launch_kv<KB, 1>(a, grid, stream);
    case 2:
      return launch_kv<KB, 2>(a, grid, stream);
    case 3:
      return launch_kv<KB, 3>(a, grid, stream);
    case 4:
      return launch_kv<KB, 4>(a, grid, stream);
    case 5:
      return launch_kv<KB, 5>(a, grid, stream);
    case 8:
      return launch_kv<KB, 8>(a, grid, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_decode_turbo(const DecodeLaunch& a, cudaStream_t stream) {
  const int gqa = a.p.n_heads / a.p.kv.format.n_kv_heads;
  const dim3 grid(a.plan.n_parts, a.p.kv.format.n_kv_heads * (gqa / a.plan.query_heads_per_block),
                  a.p.n_seqs);
  switch (a.p.kv.format.scheme.k_bits) {
    case 2:
      return launch_k<2>(a, grid, stream);
    case 3:
      return launch_k<3>(a, grid, stream);
    case 4:
      return launch_k<4>(a, grid, stream);
    case 5:
      return launch_k<5>(a, grid, stream);
    case 8:
      return launch_k<8>(a, grid, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tkv::kernels::cuda_detail
