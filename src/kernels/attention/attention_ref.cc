// Scalar reference attention over contiguous fp32 K/V: two-pass softmax in
// double, the oracle for every CPU attention path.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention/attention.h"

namespace tkv::kernels {

void attention_f32_ref(const float* k, const float* v, int64_t n_kv, int n_kv_heads, int head_dim,
                       const AttnArgs& a) {
  attention_f32_ref(k, v, n_kv, n_kv_heads, head_dim, a, nullptr, nullptr);
}

void attention_f32_ref(const float* k, const float* v, int64_t n_kv, int n_kv_heads, int head_dim,
                       const AttnArgs& a, const float* q_alt, const uint8_t* alt) {
  const int group = a.n_heads / n_kv_heads;
  std::vector<double> s(static_cast<size_t>(n_kv));
  for (int64_t i = 0; i < a.n_q; ++i) {
    const int64_t pos = a.q_pos0 + i;
    const int64_t hi = pos < n_kv - 1 ? pos : n_kv - 1;
    const int64_t lo = a.window > 0 && pos - a.window + 1 > 0 ? pos - a.window + 1 : 0;
    for (int h = 0; h < a.n_heads; ++h) {
      const float* q0 = a.q + (i * a.n_heads + h) * head_dim;
      const float* q1 = q_alt ? q_alt + (i * a.n_heads + h) * head_dim : nullptr;
      const int kh = h / group;
      double mx = -INFINITY;
      for (int64_t j = lo; j <= hi; ++j) {
        const float* q = alt && alt[j] ? q1 : q0;
        const float* kr = k + (j * n_kv_heads + kh) * head_dim;
        double d = 0;
        for (int e = 0; e < head_dim; ++e) d += static_cast<double>(q[e]) * kr[e];
        s[static_cast<size_t>(j)] = d * a.scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = lo; j <= hi; ++j)
        sum += (s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - mx));
      float* o = a.out + (i * a.n_heads + h) * head_dim;
      for (int e = 0; e < head_dim; ++e) {
        double acc = 0;
        for (int64_t j = lo; j <= hi; ++j)
          acc += s[static_cast<size_t>(j)] * v[(j * n_kv_heads + kh) * head_dim + e];
        o[e] = hi >= lo ? static_cast<float>(acc / sum) : 0.0f;
      }
    }
  }
}

}  // namespace tkv::kernels
