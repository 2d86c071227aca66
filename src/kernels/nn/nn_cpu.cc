// CPU implementations of the small nn kernels (see nn.h). Plain loops over
// contiguous fp32 rows, vectorised by the compiler.
#include "kernels/nn/nn.h"

#include <cmath>

namespace tkv::kernels {

void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double ss = 0.0;  // ggml accumulates the sum of squares in double-precision (ggml_float)
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
    if (w) {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * w[i];
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
    }
  }
}

void rope(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
          int64_t n_rot, float base, float freq_scale, RopeMode mode) {
  const int64_t half = n_rot / 2;
  float cs[512], sn[512];
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float p = static_cast<float>(positions[t]) * freq_scale;
    // theta_i = p * base^(-2i/n_rot), computed as repeated products like ggml.
    const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
    float theta = p;
    for (int64_t i = 0; i < half; ++i) {
      cs[i] = std::cos(theta);
      sn[i] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = mode == RopeMode::kNorm ? 2 * i : i;
        const int64_t b = mode == RopeMode::kNorm ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float gl = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + kCoef * g * g)));
    gate[i] = gl * up[i];
  }
}

void softmax(float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
void scale_inplace(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}
void add_bias(float* y, const float* b, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += b[i];
}

}  // namespace tkv::kernels
