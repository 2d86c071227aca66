// Small per-token neural-net kernels on fp32 rows: RMSNorm, RoPE, gated
// activations, softmax. Written as plain loops that the compiler vectorises
// (AVX2 baseline); they are a few % of a forward pass, matmul is the rest.
// Reference: ggml-cpu ops (rms_norm, rope NORM/NEOX, swiglu, geglu-tanh).
#pragma once
#include <cstdint>

namespace tkv::kernels {

// y[t, :] = x[t, :] / sqrt(mean(x^2) + eps) * w. x, y: [n_rows, n]; w: [n] (may be null = 1).
void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps);

enum class RopeMode { kNorm, kNeox };  // kNorm: pairs (2i, 2i+1); kNeox: pairs (i, i + n_rot/2)
// In place on x [n_tokens, n_heads, head_dim]; positions [n_tokens]. Rotates the
// first n_rot dims of every head with theta_i = pos * base^(-2i/n_rot) * freq_scale.
void rope(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
          int64_t n_rot, float base, float freq_scale, RopeMode mode);

// gate[i] = act(gate[i]) * up[i] over n elements. SiLU (SwiGLU) and tanh-GELU (GeGLU).
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// In place softmax over n values; returns nothing. Uses max subtraction.
void softmax(float* x, int64_t n);

// y += x over n; y = x * s over n.
void add_inplace(float* y, const float* x, int64_t n);
void scale_inplace(float* y, float s, int64_t n);
// y[t, :] += b for n_rows rows of length n.
void add_bias(float* y, const float* b, int64_t n_rows, int64_t n);

}  // namespace tkv::kernels
