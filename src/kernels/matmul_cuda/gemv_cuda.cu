// The decode GEMV kernel (matmul_cuda.h): a block streams a contiguous range of weight
// rows through a kStages-deep cp.async ring in shared memory, 16 bytes per copy over the
// rows' byte range (whole 32-byte sectors whatever the block size; bytes in flight need no
// registers). Thread u of the block owns 32-element units u, u + threads, ... of every
// row and holds x of those units for token_chunk tokens in registers (quantized weights:
// x as int8 per unit, quantized as the CPU quantizes it, for dp4a), so x is read once per block
// while the weights stream past. Per-row sums: warp shuffles, then the warps' partials added in
// warp order (deterministic).
#include "kernels/matmul_cuda/gemv_common_cuda.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kStages = 3;

template <class F, int TC, int UPT>
__global__ void __launch_bounds__(256) gemv_rows_kernel(const GemvArgs a) {
  extern __shared__ uint4 smem_u4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_u4);
  float* red = reinterpret_cast<float*>(smem + kStages * a.stage_bytes);  // [warps][rps][TC]
  const int n_units = a.n_in / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_warps = blockDim.x / 32, t0 = (blockIdx.x % a.grid_y) * TC;

  XUnit<F> xs[UPT][TC];
#pragma unroll
  for (int u = 0; u < UPT; ++u) {
    const int unit = threadIdx.x + u * blockDim.x;
#pragma unroll
    for (int t = 0; t < TC; ++t)
      xs[u][t].load(a.x + (int64_t)(t0 + t) * a.n_in + 32 * unit,
                    unit < n_units && t0 + t < a.n_tokens);
  }

  // Run xb of the grid_x balanced runs of stages; its rows [r_begin, r_end).
  const int xb = blockIdx.x / a.grid_y;
  const int s_begin = (int)((int64_t)xb * a.n_stages / a.grid_x);
  const int s_end = (int)((int64_t)(xb + 1) * a.n_stages / a.grid_x);
  const int r_begin = s_begin * a.rows_per_stage;
  const int r_end = min(a.n_out, s_end * a.rows_per_stage);
  const int n_st = s_end - s_begin;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    const int r0 = r_begin + s * a.rows_per_stage;
    if (s < n_st)
      issue_stage(a, smem + s * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage), threadIdx.x,
                  blockDim.x);
    cp_async_commit();
  }
  for (int s = 0; s < n_st; ++s) {
    {
      const int sn = s + kStages - 1, r0 = r_begin + sn * a.rows_per_stage;
      if (sn < n_st)
        issue_stage(a, smem + (sn % kStages) * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage),
                    threadIdx.x, blockDim.x);
      cp_async_commit();
    }
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const int r0 = r_begin + s * a.rows_per_stage, r1 = min(r_end, r0 + a.rows_per_stage);
    const uint8_t* rows = smem + (s % kStages) * a.stage_bytes + (((int64_t)r0 * a.row_bytes) & 15);
    for (int i = 0; i < r1 - r0; ++i) {
      float acc[TC];
#pragma unroll
      for (int t = 0; t < TC; ++t) acc[t] = 0.f;
#pragma unroll
      for (int u = 0; u < UPT; ++u) {
        const int unit = threadIdx.x + u * blockDim.x;
        if (unit < n_units) unit_dot<F, TC>(rows + i * a.row_bytes, unit, xs[u], acc);
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
      store_y(a, t0 + t, r0 + i, sum);
    }
  }
}

template <class F, int UPT>
const void* kernel_upt(int token_chunk) {
  constexpr int kMax = (F::kQuant ? kGemvQuantXUnits : kGemvFloatXUnits) / UPT;
  switch (token_chunk) {
    case 1:
      return (const void*)gemv_rows_kernel<F, 1, UPT>;
    case 2:
      if constexpr (kMax >= 2) return (const void*)gemv_rows_kernel<F, 2, UPT>;
      break;
    case 4:
      if constexpr (kMax >= 4) return (const void*)gemv_rows_kernel<F, 4, UPT>;
      break;
    case 8:
      if constexpr (kMax >= 8) return (const void*)gemv_rows_kernel<F, 8, UPT>;
      break;
  }
  return nullptr;
}

template <class F>
const void* kernel_format(int units_per_thread, int token_chunk) {
  switch (units_per_thread) {
    case 1:
      return kernel_upt<F, 1>(token_chunk);
    case 2:
      return kernel_upt<F, 2>(token_chunk);
    case 4:
      return kernel_upt<F, 4>(token_chunk);
  }
  return nullptr;
}

}  // namespace

const void* gemv_kernel(ggml::Type type, int units_per_thread, int token_chunk) {
  using T = ggml::Type;
  const int u = units_per_thread, tc = token_chunk;
  switch (type) {
    case T::kQ4_0:
      return kernel_format<DecodeQ4_0>(u, tc);
    case T::kQ4_1:
      return kernel_format<DecodeQ4_1>(u, tc);
    case T::kQ5_0:
      return kernel_format<DecodeQ5_0>(u, tc);
    case T::kQ8_0:
      return kernel_format<DecodeQ8_0>(u, tc);
    case T::kQ4_K:
      return kernel_format<DecodeQ4_K>(u, tc);
    case T::kQ5_K:
      return kernel_format<DecodeQ5_K>(u, tc);
    case T::kQ6_K:
      return kernel_format<DecodeQ6_K>(u, tc);
    case T::kF16:
      return kernel_format<DecodeHalf<false>>(u, tc);
    case T::kBF16:
      return kernel_format<DecodeHalf<true>>(u, tc);
    case T::kF32:
      return kernel_format<DecodeF32>(u, tc);
    default:
      return nullptr;
  }
}

cudaError_t launch_gemv(const GemvCudaParams& p, const GemvPlan& plan, cudaStream_t stream) {
  GemvArgs a{};
  a.w = static_cast<const uint8_t*>(p.w);
  a.x = p.x;
  a.y = p.y;
  a.row_bytes = (int64_t)ggml::row_bytes(p.type, p.n_in);
  a.total_bytes = a.row_bytes * p.n_out;
  a.n_in = (int)p.n_in, a.n_out = (int)p.n_out, a.n_tokens = p.n_tokens;
  a.split1 = (int)(p.split1 > 0 ? p.split1 : p.n_out);
  a.split2 = (int)(p.split2 > 0 ? p.split2 : p.n_out);
  a.y1 = p.y1, a.y2 = p.y2;
  a.rows_per_stage = plan.rows_per_stage, a.n_stages = plan.n_stages;
  a.stage_bytes = plan.stage_bytes, a.grid_x = plan.grid_x, a.grid_y = plan.grid_y;
  void* args[] = {&a};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(plan.grid_x * plan.grid_y);
  cfg.blockDim = dim3(plan.threads);
  cfg.dynamicSmemBytes = plan.smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (plan.warp && p.pdl) cfg.attrs = &attr, cfg.numAttrs = 1;
  return cudaLaunchKernelExC(&cfg, plan.kernel, args);
}

}  // namespace tkv::kernels::cuda_detail
