// Internal seams of the CPU matmul: the per-ISA row kernels (AVX2 and AVX-512
// VNNI builds of matmul_cpu_kernels.inc), the activation format each weight
// type pairs with (llama.cpp's vec_dot_type), and an ISA-forcing entry point
// so tests can check both code paths on one machine.
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/matmul/act_quant.h"
#include "kernels/matmul/matmul.h"

namespace tkv::kernels {

// Computes y[t, r] for rows [r0, r1) and all n_tokens tokens. `a` is the quantized
// activation (nullptr for float-activation types, which read x directly).
using RowsFn = void (*)(const WeightView& w, const ActQ8* a, const float* x, int64_t n_tokens,
                        int64_t r0, int64_t r1,
                        float* y);  // x: [n_tokens, n_in], y: [n_tokens, n_out]

namespace avx2 {
RowsFn rows_fn(ggml::Type type);
}
namespace avx512 {
RowsFn rows_fn(ggml::Type type);
}

enum class CpuIsa { kAuto, kAvx2, kAvx512Vnni };
bool cpu_has_avx512_vnni();

// Activation quantization used for a weight type; false for fp32-activation types.
bool act_kind_for(ggml::Type type, ActKind* kind);

// matmul_cpu with the ISA forced (kAuto = what matmul_cpu uses). Asking for
// kAvx512Vnni on a CPU without it aborts.
void matmul_cpu_isa(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                    ThreadPool& pool, CpuIsa isa);

}  // namespace tkv::kernels
