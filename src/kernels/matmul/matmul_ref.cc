// Reference matmul, the oracle for every backend: dequantize each weight row
// with dequantize_row (quant/ggml_dequant.h layouts) and take fp32 dot products
// accumulated in double. Slow on purpose; no activation quantization.
#include <vector>

#include "base/check.h"
#include "kernels/matmul/matmul.h"

namespace tkv::kernels {

void matmul_ref(const WeightView& w, const float* x, float* y, int64_t n_tokens) {
  TKV_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out >= 0 && n_tokens >= 0);
  const size_t rb = ggml::row_bytes(w.type, w.n_in);
  std::vector<float> row(static_cast<size_t>(w.n_in));
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(o) * rb,
                   row.data(), w.n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.n_in;
      double acc = 0.0;
      for (int64_t i = 0; i < w.n_in; ++i)
        acc += static_cast<double>(row[static_cast<size_t>(i)]) * xt[i];
      y[t * w.n_out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace tkv::kernels
