// CUDA versions of the small per-token kernels of kernels/nn (RMSNorm, RoPE, gated
// activations, residual adds, biases) plus the fp32 <-> bf16 conversions the decode
// attention's q/out need. Same math as nn_cpu.cc (the reference), one launch each, on
// device pointers; every function returns the launch error (asynchronous execution).
// Plain C++17: nvcc and host code include it. Tests: tests/cuda/nn_cuda_test.cc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/nn/nn.h"  // RopeMode

namespace tkv::kernels {

// x <- H(x ⊙ sign) * inv_sqrt per row of n elements (quant::fwht_forward bit for bit; the
// key rotation of KvScheme::k_rotated); n a power of two in [32, 512], sign on the device.
cudaError_t fwht_rows_cuda(float* x, int64_t n_rows, int n, const float* sign, float inv_sqrt,
                           cudaStream_t stream);

// y[r, :] = x[r, :] / sqrt(mean(x^2) + eps) * w (w may be null). x, y: [n_rows, n] (may alias).
cudaError_t rms_norm_cuda(const float* x, const float* w, float* y, int64_t n_rows, int64_t n,
                          float eps, cudaStream_t stream);
// x += h, then y = rms_norm(x) (the residual add fused with the next norm); y may alias h.
cudaError_t add_rms_norm_cuda(float* x, const float* h, const float* w, float* y, int64_t n_rows,
                              int64_t n, float eps, cudaStream_t stream);
// In place on x [n_tokens, n_heads, head_dim]; positions [n_tokens] (device), as kernels::rope.
cudaError_t rope_cuda(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
                      int64_t head_dim, int64_t n_rot, float base, float freq_scale, RopeMode mode,
                      cudaStream_t stream);
// gate[i] = act(gate[i]) * up[i] over n elements.
cudaError_t silu_mul_cuda(float* gate, const float* up, int64_t n, cudaStream_t stream);
cudaError_t gelu_tanh_mul_cuda(float* gate, const float* up, int64_t n, cudaStream_t stream);
// y += x; y *= s; y[r, :] += b for n_rows rows of n.
cudaError_t add_inplace_cuda(float* y, const float* x, int64_t n, cudaStream_t stream);
cudaError_t scale_inplace_cuda(float* y, float s, int64_t n, cudaStream_t stream);
cudaError_t add_bias_cuda(float* y, const float* b, int64_t n_rows, int64_t n, cudaStream_t stream);
// Round to nearest even (quant::f32_to_bf16) and back, n elements.
cudaError_t f32_to_bf16_cuda(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
cudaError_t bf16_to_f32_cuda(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);
// x[r, :] = qs * rint(x[r, :] / qs), qs = max|x[r, :]| / 127, for n_rows rows of n (in place):
// the query as the CPU's fused attention sees it over quantized keys
// (kernels::fused_int8_query_rows), so both backends score with the same int8 query.
cudaError_t int8_grid_rows_cuda(float* x, int64_t n_rows, int64_t n, cudaStream_t stream);
// dst[i, :] = src[rows[i], :] for n_rows rows of n floats (the logits' wanted rows).
cudaError_t gather_rows_cuda(const float* src, const int32_t* rows, float* dst, int64_t n_rows,
                             int64_t n, cudaStream_t stream);

}  // namespace tkv::kernels
