// CUDA prefill GEMM over GGUF-quantized weights: y[t, o] = sum_i W[o, i] * x[t, i] for
// many tokens, on tensor cores. The weights are dequantized to bf16 into a scratch slab
// (at most kGemmSlabBytes, so a vocabulary matrix runs in several slabs), x is rounded to
// bf16, and cuBLAS multiplies them with fp32 accumulation. Below about 32 tokens the
// decode GEMV (matmul_cuda.h) is faster: it reads the quantized bytes once and writes
// nothing. Plain C++17 (nvcc includes it); the reference is matmul_ref.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/ggml_types.h"

namespace tkv {
class Status;  // base/status.h
}

namespace tkv::kernels {

constexpr int64_t kGemmSlabBytes = int64_t{128} << 20;  // bf16 weight rows per pass

struct GemmCudaParams {
  const void* w = nullptr;  // [n_out, n_in] in `type` blocks, device
  ggml::Type type = ggml::Type::kF32;
  int64_t n_in = 0, n_out = 0;  // n_in a multiple of the type's block elements
  int64_t n_tokens = 0;
  const float* x = nullptr;  // [n_tokens, n_in] device
  float* y = nullptr;        // [n_tokens, n_out] device
  void* scratch = nullptr;   // gemm_cuda_scratch_bytes(...) bytes, device, 16-byte aligned
  int64_t scratch_bytes = 0;
  void* cublas = nullptr;  // a handle from gemm_cuda_create
};

// The types gemm_cuda dequantizes: those of gemv_cuda_supports.
bool gemm_cuda_supports(ggml::Type type);
int64_t gemm_cuda_scratch_bytes(int64_t n_in, int64_t n_out, int64_t n_tokens);
// A cuBLAS handle (opaque), or an error naming why none could be made.
Status gemm_cuda_create(void** handle);
void gemm_cuda_destroy(void* handle);
// Validates p ("[matmul_cuda] ..."), then enqueues on stream. Error model
// (tests/cuda/matmul_cuda_test.cc): W and x each rounded to bf16 (relative 2^-9),
// products and sums in fp32 in cuBLAS's order.
Status gemm_cuda(const GemmCudaParams& p, cudaStream_t stream);

namespace cuda_detail {
// dst[r, i] = bf16(W[r, i]) for rows [0, n_rows) of a [*, n_in] matrix in `type` blocks.
cudaError_t dequant_bf16(const void* w, ggml::Type type, int64_t n_rows, int64_t n_in,
                         uint16_t* dst, cudaStream_t stream);
cudaError_t f32_to_bf16(const float* x, int64_t n, uint16_t* dst, cudaStream_t stream);
}  // namespace cuda_detail

}  // namespace tkv::kernels
