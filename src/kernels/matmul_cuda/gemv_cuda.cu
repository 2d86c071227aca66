// The decode GEMV kernel (matmul_cuda.h): a block streams a contiguous range of weight
// rows through a kStages-deep cp.async ring in shared memory, 16 bytes per copy over the
// rows' byte range (whole 32-byte sectors whatever the block size; bytes in flight need no
// registers). Thread u of the block owns 32-element units u, u + threads, ... of every
// row and holds x of those units for token_chunk tokens in registers (quantized weights:
// x as int8 per unit, quantized as the CPU quantizes it, for dp4a), so x is read once per block
// while the weights stream past. Per-row sums: warp shuffles, then the warps' partials added in
// warp order (deterministic).
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
  float* y;          // [n_tokens, split1] (split1 = n_out without a split)
  float *y1, *y2;    // rows [split1, split2) and [split2, n_out) (GemvCudaParams)
  int split1, split2;
  int64_t total_bytes, row_bytes;
  int n_in, n_out, n_tokens;
  int rows_per_stage, n_stages, stage_bytes, grid_x, grid_y;
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

// 32 floats of x (zeros where !ok).
__device__ __forceinline__ void load_x32(const float* x, bool ok, float (&v)[32]) {
  const float4* xp = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 q = ok ? __ldg(xp + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z, v[4 * i + 3] = q.w;
  }
}

// x of one 32-element unit for one token, as the kernel holds it. Quantized weights: int8
// r_i packed four to a word with the scale s, quantized as the CPU matmul quantizes
// activations for that weight format (F::kAct, see gemv_decode_cuda.cuh), minus kOffset
// times the halves' sums of r (so d * (q - kOffset) needs no per-element subtraction),
// and for the formats with a min the activation sum the CPU uses (s * sum(r), fp16 for
// kQ8_1). Float weights: the 32 floats.
template <class F, bool Q = F::kQuant>
struct XUnit {
  uint32_t r[8];
  float s, sum;
  int off0, off1;
  // Every lane of the warp calls load together (kQ8_K reduces over 8 lanes: the 8 units of
  // a 256-block are held by 8 consecutive lanes; n_in is a multiple of 256 for those formats).
  __device__ __forceinline__ void load(const float* x, bool ok) {
    float v[32];
    load_x32(x, ok, v);
    float amax = 0.f;
#pragma unroll
    for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(v[e]));
    float scale, inv;
    if constexpr (F::kAct == ActMode::kQ8_K) {
      // The block's first element of largest magnitude (lowest lane wins a tie): its sign
      // is the sign of the scale.
      float first = 0.f;
#pragma unroll
      for (int e = 31; e >= 0; --e)
        if (fabsf(v[e]) == amax) first = v[e];
      float bmax = amax;
      int src = threadIdx.x % 32;
#pragma unroll
      for (int o = 1; o < 8; o *= 2) {
        const float om = __shfl_xor_sync(0xffffffffu, bmax, o);
        const int os = __shfl_xor_sync(0xffffffffu, src, o);
        if (om > bmax || (om == bmax && os < src)) bmax = om, src = os;
      }
      first = __shfl_sync(0xffffffffu, first, src);
      inv = bmax > 0.f ? -127.f / first : 0.f;
      scale = bmax > 0.f ? 1.f / inv : 0.f;
    } else {
      inv = amax > 0.f ? 127.f / amax : 0.f;
      scale = amax / 127.f;
    }
    int h0 = 0, h1 = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      int q[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = min(127, __float2int_rn(v[4 * k + i] * inv));
      (k < 4 ? h0 : h1) += q[0] + q[1] + q[2] + q[3];
      r[k] = (uint32_t)(q[0] & 0xff) | ((uint32_t)(q[1] & 0xff) << 8) |
             ((uint32_t)(q[2] & 0xff) << 16) | ((uint32_t)q[3] << 24);
    }
    if constexpr (F::kAct == ActMode::kQ8_K) {
      s = scale, sum = scale * (float)(h0 + h1);
    } else {
      s = __half2float(__float2half_rn(scale));
      sum = F::kAct == ActMode::kQ8_1 ? __half2float(__float2half_rn(scale * (float)(h0 + h1)))
                                      : s * (float)(h0 + h1);
    }
    off0 = -F::kOffset * h0, off1 = -F::kOffset * h1;
  }
  // sum_i w_i * x_i over the unit, from its packed quants and scales.
  __device__ __forceinline__ float dot(const uint32_t (&q)[8], const UnitScale& u) const {
    int d0 = off0, d1 = off1;
#pragma unroll
    for (int k = 0; k < 4; ++k) d0 = __dp4a((int)q[k], (int)r[k], d0);
#pragma unroll
    for (int k = 4; k < 8; ++k) d1 = __dp4a((int)q[k], (int)r[k], d1);
    const float c = fmaf(u.d0, (float)d0, u.d1 * (float)d1) * s;
    return F::kMin ? fmaf(u.m, sum, c) : c;
  }
};

template <class F>
struct XUnit<F, false> {
  float v[32];
  __device__ __forceinline__ void load(const float* x, bool ok) { load_x32(x, ok, v); }
  __device__ __forceinline__ float dot(const float (&w)[32]) const {
    float a[4] = {0.f, 0.f, 0.f, 0.f};  // four chains: latency, not order, bounds this loop
#pragma unroll
    for (int e = 0; e < 32; ++e) a[e % 4] = fmaf(w[e], v[e], a[e % 4]);
    return (a[0] + a[1]) + (a[2] + a[3]);
  }
};

// Unit `unit` of the row at `row` (shared memory) against TC tokens' x, into acc.
template <class F, int TC>
__device__ __forceinline__ void unit_dot(const uint8_t* row, int unit, const XUnit<F> (&x)[TC],
                                         float (&acc)[TC]) {
  constexpr int kUnitsPerBlock = F::kBlockElems / 32;
  const uint8_t* b = row + (unit / kUnitsPerBlock) * F::kBlockBytes;
  if constexpr (F::kQuant) {
    uint32_t q[8];
    const UnitScale u = F::unit(b, unit % kUnitsPerBlock, q);
#pragma unroll
    for (int t = 0; t < TC; ++t) acc[t] += x[t].dot(q, u);
  } else {
    float w[32];
    F::unit(b, 0, w);
#pragma unroll
    for (int t = 0; t < TC; ++t) acc[t] += x[t].dot(w);
  }
}

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
    if (s < n_st) issue_stage(a, smem + s * a.stage_bytes, r0, min(r_end, r0 + a.rows_per_stage));
    cp_async_commit();
  }
  for (int s = 0; s < n_st; ++s) {
    {
      const int sn = s + kStages - 1, r0 = r_begin + sn * a.rows_per_stage;
      if (sn < n_st)
        issue_stage(a, smem + (sn % kStages) * a.stage_bytes, r0,
                    min(r_end, r0 + a.rows_per_stage));
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
      const int r = r0 + i;
      if (r < a.split1)
        a.y[(int64_t)(t0 + t) * a.split1 + r] = sum;
      else if (r < a.split2)
        a.y1[(int64_t)(t0 + t) * (a.split2 - a.split1) + (r - a.split1)] = sum;
      else
        a.y2[(int64_t)(t0 + t) * (a.n_out - a.split2) + (r - a.split2)] = sum;
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
  return cudaLaunchKernel(plan.kernel, dim3(plan.grid_x * plan.grid_y), dim3(plan.threads), args,
                          plan.smem_bytes, stream);
}

}  // namespace tkv::kernels::cuda_detail
