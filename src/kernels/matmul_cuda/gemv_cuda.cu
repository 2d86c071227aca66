// The decode GEMV kernel (matmul_cuda.h): a block streams a contiguous range of weight
// rows through a kStages-deep cp.async ring in shared memory, 16 bytes per copy over the
// rows' byte range (whole 32-byte sectors whatever the block size; bytes in flight need no
// registers). Thread u of the block owns 32-element units u, u + threads, ... of every
// row and holds x of those units for token_chunk tokens in registers, so x is read once
// per block while the weights stream past. Per-row sums: warp shuffles, then the warps'
// partials added in warp order (deterministic).
#include "kernels/matmul_cuda/gemv_decode_cuda.cuh"
#include "kernels/matmul_cuda/matmul_cuda.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kStages = 3;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

struct GemvArgs {
  const uint8_t* w;  // [n_out, row_bytes]
  const float* x;    // [n_tokens, n_in]
  float* y;          // [n_tokens, n_out]
  int64_t total_bytes, row_bytes;
  int n_in, n_out, n_tokens;
  int rows_per_stage, rows_per_block, stage_bytes;
};

// Copies rows [r0, r1)'s bytes, from the 16-byte boundary at or below their start,
// into buf; returns nothing (the consumer recomputes the offset). The tail chunk reads
// only the bytes inside the matrix (zero-filled past its end).
__device__ __forceinline__ void issue_stage(const GemvArgs& a, uint8_t* buf, int r0, int r1) {
  const int64_t lo = (int64_t)r0 * a.row_bytes, hi = (int64_t)r1 * a.row_bytes;
  const int64_t base = lo & ~int64_t(15);
  const int n16 = (int)((hi - base + 15) >> 4);
  for (int c = threadIdx.x; c < n16; c += blockDim.x) {
    const int64_t off = base + 16 * (int64_t)c;
    const int64_t left = a.total_bytes - off;
    cp_async16(buf + 16 * c, a.w + off, left >= 16 ? 16 : (int)left);
  }
}

template <class F, int TC, int UPT>
__global__ void __launch_bounds__(256) gemv_kernel(const GemvArgs a) {
  extern __shared__ uint4 smem_u4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u4);
  float* red = reinterpret_cast<float*>(smem + kStages * a.stage_bytes);  // [warps][rps][TC]
  constexpr int kUnitsPerBlock = F::kBlockElems / 32;
  const int n_units = a.n_in / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_warps = blockDim.x / 32, t0 = blockIdx.y * TC;

  float xr[UPT][TC][32];
#pragma unroll
  for (int u = 0; u < UPT; ++u) {
    const int unit = threadIdx.x + u * blockDim.x;
#pragma unroll
    for (int t = 0; t < TC; ++t) {
      const bool ok = unit < n_units && t0 + t < a.n_tokens;
      const float4* xp = reinterpret_cast<const float4*>(a.x + (int64_t)(t0 + t) * a.n_in + 32 * unit);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 q = ok ? __ldg(xp + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        xr[u][t][4 * i] = q.x, xr[u][t][4 * i + 1] = q.y, xr[u][t][4 * i + 2] = q.z;
        xr[u][t][4 * i + 3] = q.w;
      }
    }
  }

  const int r_begin = blockIdx.x * a.rows_per_block;
  const int r_end = min(a.n_out, r_begin + a.rows_per_block);
  const int n_st = (r_end - r_begin + a.rows_per_stage - 1) / a.rows_per_stage;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    const int r0 = r_begin + s * a.rows_per_stage;
    if (s < n_st) issue_stage(a, smem + s * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage));
    cp_async_commit();
  }
  for (int s = 0; s < n_st; ++s) {
    {
      const int sn = s + kStages - 1, r0 = r_begin + sn * a.rows_per_stage;
      if (sn < n_st)
        issue_stage(a, smem + (sn % kStages) * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage));
      cp_async_commit();
    }
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const int r0 = r_begin + s * a.rows_per_stage, r1 = min(r_end, r0 + a.rows_per_stage);
    const int64_t lo = (int64_t)r0 * a.row_bytes;
    const uint8_t* rows = smem + (s % kStages) * a.stage_bytes + (lo & 15);
    for (int i = 0; i < r1 - r0; ++i) {
      float acc[TC];
#pragma unroll
      for (int t = 0; t < TC; ++t) acc[t] = 0.f;
#pragma unroll
      for (int u = 0; u < UPT; ++u) {
        const int unit = threadIdx.x + u * blockDim.x;
        if (unit < n_units) {
          float v[32];
          F::unit(rows + i * a.row_bytes + (unit / kUnitsPerBlock) * F::kBlockBytes,
                  unit % kUnitsPerBlock, v);
#pragma unroll
          for (int t = 0; t < TC; ++t)
#pragma unroll
            for (int e = 0; e < 32; ++e) acc[t] = fmaf(v[e], xr[u][t][e], acc[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < TC; ++t) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
        if (lane == 0) red[(warp * a.rows_per_stage + i) * TC + t] = acc[t];
      }
    }
    __syncthreads();  // red complete; the buffer of stage s may be refilled
    for (int k = threadIdx.x; k < (r1 - r0) * TC; k += blockDim.x) {
      const int i = k / TC, t = k % TC;
      if (t0 + t >= a.n_tokens) continue;
      float sum = 0.f;
      for (int w = 0; w < n_warps; ++w) sum += red[(w * a.rows_per_stage + i) * TC + t];
      a.y[(int64_t)(t0 + t) * a.n_out + r0 + i] = sum;
    }
  }
}

template <class F, int TC, int UPT>
cudaError_t launch_one(const GemvArgs& a, const GemvPlan& plan, cudaStream_t stream) {
  auto* k = gemv_kernel<F, TC, UPT>;
  cudaError_t e =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, plan.smem_bytes);
  if (e != cudaSuccess) return e;
  k<<<dim3(plan.grid_x, plan.grid_y), plan.threads, plan.smem_bytes, stream>>>(a);
  return cudaGetLastError();
}

template <class F>
cudaError_t launch_format(const GemvArgs& a, const GemvPlan& plan, cudaStream_t stream) {
  const int u = plan.units_per_thread, tc = plan.token_chunk;
  if (u == 1 && tc == 1) return launch_one<F, 1, 1>(a, plan, stream);
  if (u == 1) return launch_one<F, 4, 1>(a, plan, stream);
  if (u == 2 && tc == 1) return launch_one<F, 1, 2>(a, plan, stream);
  if (u == 2) return launch_one<F, 2, 2>(a, plan, stream);
  return launch_one<F, 1, 4>(a, plan, stream);
}

}  // namespace

cudaError_t launch_gemv(const GemvCudaParams& p, const GemvPlan& plan, cudaStream_t stream) {
  GemvArgs a{};
  a.w = static_cast<const uint8_t*>(p.w);
  a.x = p.x;
  a.y = p.y;
  a.row_bytes = (int64_t)ggml::row_bytes(p.type, p.n_in);
  a.total_bytes = a.row_bytes * p.n_out;
  a.n_in = (int)p.n_in, a.n_out = (int)p.n_out, a.n_tokens = p.n_tokens;
  a.rows_per_stage = plan.rows_per_stage, a.rows_per_block = plan.rows_per_block;
  a.stage_bytes = plan.stage_bytes;
  using T = ggml::Type;
  switch (p.type) {
    case T::kQ4_0: return launch_format<DecodeQ4_0>(a, plan, stream);
    case T::kQ4_1: return launch_format<DecodeQ4_1>(a, plan, stream);
    case T::kQ5_0: return launch_format<DecodeQ5_0>(a, plan, stream);
    case T::kQ8_0: return launch_format<DecodeQ8_0>(a, plan, stream);
    case T::kQ4_K: return launch_format<DecodeQ4_K>(a, plan, stream);
    case T::kQ5_K: return launch_format<DecodeQ5_K>(a, plan, stream);
    case T::kQ6_K: return launch_format<DecodeQ6_K>(a, plan, stream);
    case T::kF16: return launch_format<DecodeHalf<false>>(a, plan, stream);
    case T::kBF16: return launch_format<DecodeHalf<true>>(a, plan, stream);
    case T::kF32: return launch_format<DecodeF32>(a, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace tkv::kernels::cuda_detail
