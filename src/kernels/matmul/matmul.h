// Weight × activation products for GGUF weight types. Weights are row-major
// [n_out, n_in] in their quantized block layout (one GGUF row = one output);
// activations are fp32 [n_tokens, n_in]; output fp32 [n_tokens, n_out].
// The CPU path quantizes activations once per call (Q8 blocks) and uses
// integer dot products; the ref path dequantizes to fp32 and is the oracle.
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "quant/ggml_types.h"

namespace tkv::kernels {

struct WeightView {
  const void* data = nullptr;  // [n_out, n_in] in `type` blocks
  ggml::Type type = ggml::Type::kF32;
  int64_t n_in = 0;   // row length in elements
  int64_t n_out = 0;  // number of rows
};

// Dequantize one row of n elements of `type` into fp32.
void dequantize_row(ggml::Type type, const void* src, float* dst, int64_t n);

// y[t, o] = sum_i w[o, i] * x[t, i]. x: [n_tokens, n_in], y: [n_tokens, n_out].
void matmul_ref(const WeightView& w, const float* x, float* y, int64_t n_tokens);
void matmul_cpu(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);
// Several weights over the same x (Q/K/V, gate/up): x is quantized once per
// activation kind and all rows go through one parallel loop, so the results equal
// n_w separate matmul_cpu calls bit for bit with fewer thread-pool round trips.
// Every ws[i].n_in must be equal; ys[i]: [n_tokens, ws[i].n_out]; n_w <= 4.
void matmul_cpu_multi(const WeightView* ws, int n_w, const float* x, float* const* ys,
                      int64_t n_tokens, ThreadPool& pool);

// Gather rows (embedding lookup): dst[i, :] = dequant(w[ids[i], :]).
void get_rows(const WeightView& w, const int32_t* ids, int64_t n_ids, float* dst);

}  // namespace tkv::kernels
