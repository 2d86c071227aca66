// CUDA kernels of nn_cuda.h: elementwise and per-row ops on fp32 rows, written to
// follow nn_cpu.cc operation by operation (RMSNorm's sum of squares in double as ggml
// does, RoPE's angles by the same repeated float products), so the CPU kernels are
// their reference. No fast-math: the results stay within a few ulp of the CPU's.
#include <cmath>

#include "kernels/nn_cuda/nn_cuda.h"
#include "quant/half.h"

namespace tkv::kernels {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 1048576 ? 1048576 : b));
}

// The block's sum of ss: warp shuffles, then the warps' partials (one barrier pair).
__device__ __forceinline__ double block_sum(double ss) {
  __shared__ double part[kThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  double t = 0.0;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) t += part[i];
  return t;
}

// Lets a kernel launched after this one as a programmatic dependent (the decode GEMV) be
// scheduled now: it prefetches its weights while this one runs and waits for its completion
// (griddepcontrol.wait) before it reads what this one writes. No effect on other launches.
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// One block per row; a double sum of squares. With h (add_rms_norm): x += h first, and the
// sum is over the new x. y may alias x or h (each element is read, then written, by the
// same thread).
template <bool kAdd>
__global__ void rms_norm_kernel(float* x, const float* h, const float* w, float* y, int64_t n,
                                float eps) {
  pdl_trigger();
  float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if constexpr (kAdd) {
      v = __fadd_rn(v, h[blockIdx.x * n + i]);
      xr[i] = v;
    }
    ss += (double)v * (double)v;
  }
  const float scale = 1.0f / sqrtf((float)(block_sum(ss) / (double)n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = __fmul_rn(xr[i], scale);
    yr[i] = w ? __fmul_rn(v, w[i]) : v;
  }
}

// x <- H(x ⊙ sign) * inv_sqrt per row (quant::fwht_forward, the same butterflies in the
// same order: shuffles within a warp, shared memory across warps); one block of n threads
// per row, n a power of two in [32, 512].
__global__ void fwht_rows_kernel(float* x, int n, const float* sign, float inv_sqrt) {
  __shared__ float s[512];
  float* row = x + (int64_t)blockIdx.x * n;
  const int e = threadIdx.x;
  float v = __fmul_rn(row[e], sign[e]);
  for (int h = 1; h < n; h <<= 1) {
    float other;
    if (h < 32) {
      other = __shfl_xor_sync(0xffffffffu, v, h);
    } else {
      s[e] = v;
      __syncthreads();
      other = s[e ^ h];
      __syncthreads();
    }
    v = (e & h) ? __fadd_rn(other, -v) : __fadd_rn(v, other);
  }
  row[e] = __fmul_rn(v, inv_sqrt);
}

// One thread per (token, head, pair i): theta = pos * freq_scale * theta_scale^i by i
// float products, as nn_cpu.cc.
__global__ void rope_kernel(float* x, const int32_t* pos, int64_t n_pairs_total, int64_t n_heads,
                            int64_t head_dim, int64_t half, float theta_scale, float freq_scale,
                            bool neox) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n_pairs_total;
       j += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = j % half, th = j / half, t = th / n_heads;
    float theta = __fmul_rn((float)pos[t], freq_scale);
    for (int64_t k = 0; k < i; ++k) theta = __fmul_rn(theta, theta_scale);
    const float c = cosf(theta), s = sinf(theta);
    float* v = x + th * head_dim;
    const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

#define TKV_GRID_LOOP(i, n)                                                 \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

__global__ void silu_mul_kernel(float* g, const float* u, int64_t n) {
  pdl_trigger();
  TKV_GRID_LOOP(i, n) {
    const float v = g[i];
    g[i] = __fmul_rn(__fdiv_rn(v, __fadd_rn(1.0f, expf(-v))), u[i]);
  }
}

__global__ void gelu_tanh_mul_kernel(float* g, const float* u, int64_t n) {
  pdl_trigger();
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  TKV_GRID_LOOP(i, n) {
    const float v = g[i];
    const float inner =
        __fmul_rn(__fmul_rn(kSqrt2OverPi, v), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(kCoef, v), v)));
    g[i] = __fmul_rn(__fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner))), u[i]);
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  TKV_GRID_LOOP(i, n) y[i] += x[i];
}
__global__ void scale_kernel(float* y, float s, int64_t n) {
  TKV_GRID_LOOP(i, n) y[i] *= s;
}
__global__ void bias_kernel(float* y, const float* b, int64_t total, int64_t n) {
  TKV_GRID_LOOP(i, total) y[i] += b[i % n];
}
__global__ void to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  TKV_GRID_LOOP(i, n) y[i] = f32_to_bf16(x[i]);
}
__global__ void from_bf16_kernel(const uint16_t* x, float* y, int64_t n) {
  pdl_trigger();
  TKV_GRID_LOOP(i, n) y[i] = bf16_to_f32(x[i]);
}
__global__ void gather_kernel(const float* src, const int32_t* rows, float* dst, int64_t total,
                              int64_t n) {
  TKV_GRID_LOOP(i, total) dst[i] = src[(int64_t)rows[i / n] * n + i % n];
}

// One warp per row: the row's max |x| (order-free, so exact), then each element to the
// int8 grid with round-to-nearest-even, as fused_int8_query_rows's lrint.
__global__ void int8_grid_kernel(float* x, int64_t n_rows, int64_t n) {
  const int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
  if (r >= n_rows) return;
  const int lane = threadIdx.x % 32;
  float* xr = x + r * n;
  float amax = 0.0f;
  for (int64_t i = lane; i < n; i += 32) amax = fmaxf(amax, fabsf(xr[i]));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float qs = __fdiv_rn(amax, 127.0f), inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  for (int64_t i = lane; i < n; i += 32)
    xr[i] = __fmul_rn(qs, (float)__float2int_rn(__fmul_rn(xr[i], inv)));
}

}  // namespace

cudaError_t fwht_rows_cuda(float* x, int64_t n_rows, int n, const float* sign, float inv_sqrt,
                           cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  if (n < 32 || n > 512 || (n & (n - 1)) != 0) return cudaErrorInvalidValue;
  fwht_rows_kernel<<<static_cast<unsigned>(n_rows), n, 0, stream>>>(x, n, sign, inv_sqrt);
  return cudaGetLastError();
}

cudaError_t int8_grid_rows_cuda(float* x, int64_t n_rows, int64_t n, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  constexpr int kRowsPerBlock = kThreads / 32;
  int8_grid_kernel<<<static_cast<unsigned>((n_rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads,
                     0, stream>>>(x, n_rows, n);
  return cudaGetLastError();
}

cudaError_t rms_norm_cuda(const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                          float eps, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  rms_norm_kernel<false><<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(
      const_cast<float*>(x), nullptr, w, y, n, eps);
  return cudaGetLastError();
}

cudaError_t add_rms_norm_cuda(float* x, const float* h, const float* w, float* y, int64_t n_rows,
                              int64_t n, float eps, cudaStream_t stream) {
  if (n_rows <= 0) return cudaSuccess;
  rms_norm_kernel<true><<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, h, w, y, n, eps);
  return cudaGetLastError();
}

cudaError_t rope_cuda(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
                      int64_t head_dim, int64_t n_rot, float base, float freq_scale, RopeMode mode,
                      cudaStream_t stream) {
  const int64_t half = n_rot / 2, total = n_tokens * n_heads * half;
  if (total <= 0) return cudaSuccess;
  // The host's std::pow, so the angle steps are the CPU kernel's to the bit.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  rope_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, positions, total, n_heads, head_dim,
                                                        half, theta_scale, freq_scale,
                                                        mode == RopeMode::kNeox);
  return cudaGetLastError();
}

#define TKV_LAUNCH_1D(n, kernel, ...)                          \
  do {                                                         \
    if ((n) <= 0) return cudaSuccess;                          \
    kernel<<<grid_for(n), kThreads, 0, stream>>>(__VA_ARGS__); \
    return cudaGetLastError();                                 \
  } while (0)

cudaError_t silu_mul_cuda(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, silu_mul_kernel, gate, up, n);
}
cudaError_t gelu_tanh_mul_cuda(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, gelu_tanh_mul_kernel, gate, up, n);
}
cudaError_t add_inplace_cuda(float* y, const float* x, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, add_kernel, y, x, n);
}
cudaError_t scale_inplace_cuda(float* y, float s, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, scale_kernel, y, s, n);
}
cudaError_t add_bias_cuda(float* y, const float* b, int64_t n_rows, int64_t n,
                          cudaStream_t stream) {
  TKV_LAUNCH_1D(n_rows * n, bias_kernel, y, b, n_rows * n, n);
}
cudaError_t f32_to_bf16_cuda(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, to_bf16_kernel, x, y, n);
}
cudaError_t bf16_to_f32_cuda(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n, from_bf16_kernel, x, y, n);
}
cudaError_t gather_rows_cuda(const float* src, const int32_t* rows, float* dst, int64_t n_rows,
                             int64_t n, cudaStream_t stream) {
  TKV_LAUNCH_1D(n_rows * n, gather_kernel, src, rows, dst, n_rows * n, n);
}

}  // namespace tkv::kernels
