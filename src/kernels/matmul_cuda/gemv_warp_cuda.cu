// The decode GEMV for quantized weights, 1..4 tokens and rows of up to 4096 elements, with
// one pipeline per warp (matmul_cuda.h, GemvCudaParams::Variant::kWarp): each warp owns a
// contiguous run of rows and streams it through its own kGemvWarpStages-deep cp.async ring
// in shared memory, so no block barrier sits in the stream; the warp computes whole rows
// (lane l takes units l, l + 32, ... of each, x of those units held in registers for the
// whole run) and reduces each with shuffles. The block rounds x to int8 once (as the CPU
// matmul quantizes it: gemv_common_cuda.cuh's XUnit) through shared memory, after issuing
// its warps' first stages, so the weights are in flight while x is prepared.
#include "kernels/matmul_cuda/gemv_common_cuda.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

// x of one unit in shared memory, three planes of [tokens][units] so that neighbouring
// lanes read neighbouring 16-byte words: the packed int8 quants in two halves and
// (s, sum, off0, off1).
template <class F>
__device__ __forceinline__ void x_store(uint4* xa, uint4* xb, float4* xm, int i,
                                        const XUnit<F>& u) {
  xa[i] = make_uint4(u.r[0], u.r[1], u.r[2], u.r[3]);
  xb[i] = make_uint4(u.r[4], u.r[5], u.r[6], u.r[7]);
  xm[i] = make_float4(u.s, u.sum, __int_as_float(u.off0), __int_as_float(u.off1));
}
template <class F>
__device__ __forceinline__ void x_load(const uint4* xa, const uint4* xb, const float4* xm, int i,
                                       XUnit<F>& u) {
  const uint4 a = xa[i], b = xb[i];
  const float4 m = xm[i];
  u.r[0] = a.x, u.r[1] = a.y, u.r[2] = a.z, u.r[3] = a.w;
  u.r[4] = b.x, u.r[5] = b.y, u.r[6] = b.z, u.r[7] = b.w;
  u.s = m.x, u.sum = m.y, u.off0 = __float_as_int(m.z), u.off1 = __float_as_int(m.w);
}

template <class F, int TC, int UPL>
__global__ void __launch_bounds__(256) gemv_warp_kernel(const GemvArgs a) {
  extern __shared__ uint4 smem_u4[];
  const int units = a.n_in / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_warps = blockDim.x / 32;
  uint4* xa = smem_u4;  // [TC][units] each
  uint4* xb = xa + TC * units;
  float4* xm = reinterpret_cast<float4*>(xb + TC * units);
  uint8_t* ring =
      reinterpret_cast<uint8_t*>(xm + TC * units) + warp * kGemvWarpStages * a.stage_bytes;

  // This warp's balanced run of stages (a stage: rows_per_stage whole rows).
  const int64_t gw = (int64_t)blockIdx.x * n_warps + warp, n_gw = (int64_t)gridDim.x * n_warps;
  const int s_begin = (int)(gw * a.n_stages / n_gw), s_end = (int)((gw + 1) * a.n_stages / n_gw);
  const int r_begin = s_begin * a.rows_per_stage;
  const int r_end = min(a.n_out, s_end * a.rows_per_stage);
  const int n_st = s_end - s_begin;
#pragma unroll
  for (int s = 0; s < kGemvWarpStages - 1; ++s) {
    const int r0 = r_begin + s * a.rows_per_stage;
    if (s < n_st)
      issue_stage(a, ring + s * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage), lane, 32);
    cp_async_commit();
  }
  // Launched as a programmatic dependent: the kernel before (which may write x) is complete
  // and its memory visible past this point; a no-op otherwise.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  // x, once per block, into shared memory. Every lane of a warp runs the loop together
  // (kQ8_K's 8-lane reduction): the bound is the same for the whole block.
  for (int base = 0; base < units; base += blockDim.x) {
    const int unit = base + threadIdx.x;
#pragma unroll
    for (int t = 0; t < TC; ++t) {
      XUnit<F> u;
      u.load(a.x + (int64_t)t * a.n_in + 32 * unit, unit < units && t < a.n_tokens);
      if (unit < units) x_store(xa, xb, xm, t * units + unit, u);
    }
  }
  __syncthreads();
  // ... and this lane's units into registers.
  XUnit<F> xs[UPL][TC];
#pragma unroll
  for (int k = 0; k < UPL; ++k)
#pragma unroll
    for (int t = 0; t < TC; ++t)
      if (lane + 32 * k < units) x_load(xa, xb, xm, t * units + lane + 32 * k, xs[k][t]);

  for (int s = 0; s < n_st; ++s) {
    {
      const int sn = s + kGemvWarpStages - 1, r0 = r_begin + sn * a.rows_per_stage;
      if (sn < n_st)
        issue_stage(a, ring + (sn % kGemvWarpStages) * a.stage_bytes, r0,
                    min(r_end, r0 + a.rows_per_stage), lane, 32);
      cp_async_commit();
    }
    cp_async_wait<kGemvWarpStages - 1>();
    __syncwarp();  // every lane's copies of stage s have landed and are visible to the warp
    const int r0 = r_begin + s * a.rows_per_stage, r1 = min(r_end, r0 + a.rows_per_stage);
    const uint8_t* rows =
        ring + (s % kGemvWarpStages) * a.stage_bytes + (((int64_t)r0 * a.row_bytes) & 15);
    for (int i = 0; i < r1 - r0; ++i) {
      float acc[TC];
#pragma unroll
      for (int t = 0; t < TC; ++t) acc[t] = 0.f;
#pragma unroll
      for (int k = 0; k < UPL; ++k)
        if (lane + 32 * k < units)
          unit_dot<F, TC>(rows + i * a.row_bytes, lane + 32 * k, xs[k], acc);
#pragma unroll
      for (int t = 0; t < TC; ++t) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
        if (lane == 0 && t < a.n_tokens) store_y(a, t, r0 + i, acc[t]);
      }
    }
    __syncwarp();  // the warp is done with stage s's buffer before it is refilled
  }
}

// Units per lane 1, 2 or 4 (n_in up to 1024, 2048, 4096); x of units x tokens in registers
// capped at kGemvQuantXUnits.
template <class F>
const void* warp_kernel_format(int units_per_lane, int token_chunk) {
  switch (units_per_lane * 8 + token_chunk) {
    case 9:
      return (const void*)gemv_warp_kernel<F, 1, 1>;
    case 10:
      return (const void*)gemv_warp_kernel<F, 2, 1>;
    case 12:
      return (const void*)gemv_warp_kernel<F, 4, 1>;
    case 17:
      return (const void*)gemv_warp_kernel<F, 1, 2>;
    case 18:
      return (const void*)gemv_warp_kernel<F, 2, 2>;
    case 20:
      return (const void*)gemv_warp_kernel<F, 4, 2>;
    case 33:
      return (const void*)gemv_warp_kernel<F, 1, 4>;
    case 34:
      return (const void*)gemv_warp_kernel<F, 2, 4>;
  }
  return nullptr;
}

}  // namespace

const void* gemv_warp_kernel_for(ggml::Type type, int units_per_lane, int token_chunk) {
  using T = ggml::Type;
  switch (type) {
    case T::kQ4_0:
      return warp_kernel_format<DecodeQ4_0>(units_per_lane, token_chunk);
    case T::kQ4_1:
      return warp_kernel_format<DecodeQ4_1>(units_per_lane, token_chunk);
    case T::kQ5_0:
      return warp_kernel_format<DecodeQ5_0>(units_per_lane, token_chunk);
    case T::kQ8_0:
      return warp_kernel_format<DecodeQ8_0>(units_per_lane, token_chunk);
    case T::kQ4_K:
      return warp_kernel_format<DecodeQ4_K>(units_per_lane, token_chunk);
    case T::kQ5_K:
      return warp_kernel_format<DecodeQ5_K>(units_per_lane, token_chunk);
    case T::kQ6_K:
      return warp_kernel_format<DecodeQ6_K>(units_per_lane, token_chunk);
    default:
      return nullptr;
  }
}

}  // namespace tkv::kernels::cuda_detail
