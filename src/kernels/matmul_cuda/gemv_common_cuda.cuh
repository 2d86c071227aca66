// Device pieces shared by the two decode GEMV kernels (gemv_cuda.cu: a block streams its
// rows through one shared-memory ring; gemv_warp_cuda.cu: every warp streams its own rows
// through its own ring): the cp.async copies, the launch arguments, x of one 32-element unit
// as the kernels hold it, and one unit's dot product. Included by .cu files only.
#pragma once
#include "kernels/matmul_cuda/gemv_decode_cuda.cuh"
#include "kernels/matmul_cuda/matmul_cuda.h"

namespace tkv::kernels::cuda_detail {

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
// Thread `t` of `nt` copying issues chunks t, t + nt, ...
__device__ __forceinline__ void issue_stage(const GemvArgs& a, uint8_t* buf, int r0, int r1, int t,
                                            int nt) {
  const int64_t lo = (int64_t)r0 * a.row_bytes, hi = (int64_t)r1 * a.row_bytes;
  const int64_t base = lo & ~int64_t(15);
  const int n16 = (int)((hi - base + 15) >> 4);
  for (int c = t; c < n16; c += nt) {
    const int64_t off = base + 16 * (int64_t)c;
    const int64_t left = a.total_bytes - off;
    cp_async16(buf + 16 * c, a.w + off, left >= 16 ? 16 : (int)left);
  }
}

// y[t, r] = v, into y, y1 or y2 by the row's split (GemvCudaParams).
__device__ __forceinline__ void store_y(const GemvArgs& a, int t, int r, float v) {
  if (r < a.split1)
    a.y[(int64_t)t * a.split1 + r] = v;
  else if (r < a.split2)
    a.y1[(int64_t)t * (a.split2 - a.split1) + (r - a.split1)] = v;
  else
    a.y2[(int64_t)t * (a.n_out - a.split2) + (r - a.split2)] = v;
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

}  // namespace tkv::kernels::cuda_detail
