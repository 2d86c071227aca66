// Dequantization to bf16 for the prefill GEMM (gemm_cuda.h): one thread per GGUF block,
// through the shared per-block dequantizers (quant/ggml_dequant.h, the CPU's arithmetic),
// each product rounded once to bf16; float types eight elements a thread.
#include "kernels/matmul_cuda/gemm_cuda.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_dequant.h"
#include "quant/half.h"

namespace tkv::kernels::cuda_detail {
namespace {

template <typename Block, int QK>
__global__ void dequant_blocks(const Block* __restrict__ w, int64_t n_blocks,
                               uint16_t* __restrict__ dst) {
  const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= n_blocks) return;
  float y[QK];
  ggml::dequantize_block(w[b], y);
  uint4* out = reinterpret_cast<uint4*>(dst + b * QK);
#pragma unroll
  for (int j = 0; j < QK; j += 8) {
    uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      h[k] = (uint32_t)tkv::f32_to_bf16(y[j + 2 * k]) |
             ((uint32_t)tkv::f32_to_bf16(y[j + 2 * k + 1]) << 16);
    out[j / 8] = make_uint4(h[0], h[1], h[2], h[3]);
  }
}

// T: 0 = f32, 1 = f16, 2 = bf16; eight elements a thread (n a multiple of 8).
template <int T>
__global__ void convert_floats(const void* __restrict__ w, int64_t n, uint16_t* __restrict__ dst) {
  const int64_t e = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (e >= n) return;
  uint32_t h[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    uint16_t lo, hi;
    if constexpr (T == 0) {
      const float* f = static_cast<const float*>(w) + e + 2 * k;
      lo = tkv::f32_to_bf16(f[0]);
      hi = tkv::f32_to_bf16(f[1]);
    } else if constexpr (T == 1) {
      const uint16_t* f = static_cast<const uint16_t*>(w) + e + 2 * k;
      lo = tkv::f32_to_bf16(tkv::f16_to_f32(f[0]));
      hi = tkv::f32_to_bf16(tkv::f16_to_f32(f[1]));
    } else {
      const uint16_t* f = static_cast<const uint16_t*>(w) + e + 2 * k;
      lo = f[0];
      hi = f[1];
    }
    h[k] = (uint32_t)lo | ((uint32_t)hi << 16);
  }
  *reinterpret_cast<uint4*>(dst + e) = make_uint4(h[0], h[1], h[2], h[3]);
}

template <typename Block, int QK>
cudaError_t launch_blocks(const void* w, int64_t n, uint16_t* dst, cudaStream_t s) {
  const int64_t nb = n / QK;
  const int threads = QK > 32 ? 64 : 256;
  dequant_blocks<Block, QK><<<(unsigned)((nb + threads - 1) / threads), threads, 0, s>>>(
      static_cast<const Block*>(w), nb, dst);
  return cudaGetLastError();
}
template <int T>
cudaError_t launch_floats(const void* w, int64_t n, uint16_t* dst, cudaStream_t s) {
  const int64_t nt = n / 8;
  convert_floats<T><<<(unsigned)((nt + 255) / 256), 256, 0, s>>>(w, n, dst);
  return cudaGetLastError();
}

}  // namespace

cudaError_t dequant_bf16(const void* w, ggml::Type type, int64_t n_rows, int64_t n_in,
                         uint16_t* dst, cudaStream_t s) {
  using T = ggml::Type;
  const int64_t n = n_rows * n_in;
  if (n == 0) return cudaSuccess;
  switch (type) {
    case T::kQ4_0:
      return launch_blocks<ggml::BlockQ4_0, 32>(w, n, dst, s);
    case T::kQ4_1:
      return launch_blocks<ggml::BlockQ4_1, 32>(w, n, dst, s);
    case T::kQ5_0:
      return launch_blocks<ggml::BlockQ5_0, 32>(w, n, dst, s);
    case T::kQ8_0:
      return launch_blocks<ggml::BlockQ8_0, 32>(w, n, dst, s);
    case T::kQ4_K:
      return launch_blocks<ggml::BlockQ4_K, 256>(w, n, dst, s);
    case T::kQ5_K:
      return launch_blocks<ggml::BlockQ5_K, 256>(w, n, dst, s);
    case T::kQ6_K:
      return launch_blocks<ggml::BlockQ6_K, 256>(w, n, dst, s);
    case T::kF32:
      return launch_floats<0>(w, n, dst, s);
    case T::kF16:
      return launch_floats<1>(w, n, dst, s);
    case T::kBF16:
      return launch_floats<2>(w, n, dst, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t f32_to_bf16(const float* x, int64_t n, uint16_t* dst, cudaStream_t s) {
  return n == 0 ? cudaSuccess : launch_floats<0>(x, n, dst, s);
}

}  // namespace tkv::kernels::cuda_detail
