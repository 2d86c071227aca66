// CPU matmul entry: picks the activation format of the weight type (as
// llama.cpp's vec_dot_type), quantizes x once per call, then splits output
// rows over the thread pool (dynamic chunks) and runs the per-ISA row kernels (AVX-512 VNNI
// when the CPU has it, else AVX2). Results do not depend on the thread count.
#include <algorithm>

#include "base/check.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_cpu_internal.h"

namespace tkv::kernels {

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

bool act_kind_for(ggml::Type type, ActKind* kind) {
  using ggml::Type;
  switch (type) {
    case Type::kQ4_0: case Type::kQ5_0: case Type::kQ8_0: *kind = ActKind::kQ8_0; return true;
    case Type::kQ4_1: case Type::kQ5_1: *kind = ActKind::kQ8_1; return true;
    case Type::kQ4_K: case Type::kQ5_K: case Type::kQ6_K: *kind = ActKind::kQ8_K; return true;
    default: return false;  // float weights and the dequantize fallback use fp32 x
  }
}

void matmul_cpu_isa(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool, CpuIsa isa) {
  TKV_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out >= 0 && n_tokens >= 0);
  const ggml::TypeTraits* tr = ggml::type_traits(static_cast<uint32_t>(w.type));
  TKV_CHECK_MSG(tr != nullptr && tr->supported, "[matmul] unsupported weight type");
  TKV_CHECK_MSG(w.n_in % tr->block_elems == 0, "[matmul] n_in is not a multiple of the block size");
  if (n_tokens == 0 || w.n_out == 0) return;
  if (isa == CpuIsa::kAuto) isa = cpu_has_avx512_vnni() ? CpuIsa::kAvx512Vnni : CpuIsa::kAvx2;
  TKV_CHECK_MSG(isa != CpuIsa::kAvx512Vnni || cpu_has_avx512_vnni(), "[matmul] AVX-512 VNNI not available");
  const RowsFn fn = isa == CpuIsa::kAvx512Vnni ? avx512::rows_fn(w.type) : avx2::rows_fn(w.type);

  // One activation buffer per calling thread, reused across calls (decode calls it hundreds of times per token).
  thread_local ActBuffer act_buf;
  ActKind kind;
  const ActQ8* a = nullptr;
  if (act_kind_for(w.type, &kind)) a = &quantize_act(kind, x, n_tokens, w.n_in, act_buf, &pool);

  if (pool.n_threads() <= 1 || w.n_out < 2) {
    fn(w, a, x, n_tokens, 0, w.n_out, y);
    return;
  }
  // Chunks of rows handed out dynamically: ~8 per thread, whole 16-row groups.
  const int64_t per = (w.n_out + 8 * pool.n_threads() - 1) / (8 * pool.n_threads());
  const int64_t grain = std::max<int64_t>(16, (per + 15) / 16 * 16);
  pool.parallel_for_dynamic(w.n_out, grain, [&](int, int64_t r0, int64_t r1) { fn(w, a, x, n_tokens, r0, r1, y); });
}

void matmul_cpu(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  matmul_cpu_isa(w, x, y, n_tokens, pool, CpuIsa::kAuto);
}

}  // namespace tkv::kernels
