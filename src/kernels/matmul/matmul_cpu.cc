// CPU matmul entry: picks the activation format of the weight type (as
// llama.cpp's vec_dot_type), quantizes x once per call, then splits output
// rows over the thread pool (dynamic chunks) and runs the per-ISA row kernels (AVX-512 VNNI
// when the CPU has it, else AVX2). Results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_cpu_internal.h"

namespace tkv::kernels {

bool cpu_has_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

bool act_kind_for(ggml::Type type, ActKind* kind) {
  using ggml::Type;
  switch (type) {
    case Type::kQ4_0:
    case Type::kQ5_0:
    case Type::kQ8_0:
      *kind = ActKind::kQ8_0;
      return true;
    case Type::kQ4_1:
    case Type::kQ5_1:
      *kind = ActKind::kQ8_1;
      return true;
    case Type::kQ4_K:
    case Type::kQ5_K:
    case Type::kQ6_K:
      *kind = ActKind::kQ8_K;
      return true;
    default:
      return false;  // float weights and the dequantize fallback use fp32 x
  }
}

namespace {
// Row chunks of one weight for the dynamic loop: ~8 per thread, whole 16-row groups
// (so the kernels' 16-row tiles and the results do not depend on the thread count).
int64_t row_grain(int64_t n_out, int n_threads) {
  const int64_t per = (n_out + 8 * n_threads - 1) / (8 * n_threads);
  return std::max<int64_t>(16, (per + 15) / 16 * 16);
}

void check_weight(const WeightView& w, int64_t n_tokens) {
  TKV_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out >= 0 && n_tokens >= 0);
  const ggml::TypeTraits* tr = ggml::type_traits(static_cast<uint32_t>(w.type));
  TKV_CHECK_MSG(tr != nullptr && tr->supported, "[matmul] unsupported weight type");
  TKV_CHECK_MSG(w.n_in % tr->block_elems == 0, "[matmul] n_in is not a multiple of the block size");
}

// The one driver: x quantized once per activation kind (one buffer per calling
// thread, reused: decode calls this hundreds of times per token), then the row
// chunks of every weight through one dynamic loop.
void matmul_rows(const WeightView* ws, int n_w, const float* x, float* const* ys, int64_t n_tokens,
                 ThreadPool& pool, CpuIsa isa) {
  constexpr int kMax = 4;
  TKV_CHECK(n_w >= 1 && n_w <= kMax);
  if (isa == CpuIsa::kAuto) isa = cpu_has_avx512_vnni() ? CpuIsa::kAvx512Vnni : CpuIsa::kAvx2;
  TKV_CHECK_MSG(isa != CpuIsa::kAvx512Vnni || cpu_has_avx512_vnni(),
                "[matmul] AVX-512 VNNI not available");
  thread_local ActBuffer bufs[kMax];
  RowsFn fns[kMax];
  const ActQ8* acts[kMax] = {};
  ActKind kinds[kMax];
  const ActQ8* kind_act[kMax] = {};
  int n_kinds = 0;
  for (int i = 0; i < n_w; ++i) {
    check_weight(ws[i], n_tokens);
    TKV_CHECK(ws[i].n_in == ws[0].n_in);
    fns[i] = isa == CpuIsa::kAvx512Vnni ? avx512::rows_fn(ws[i].type) : avx2::rows_fn(ws[i].type);
    ActKind kind;
    if (n_tokens == 0 || ws[i].n_out == 0 || !act_kind_for(ws[i].type, &kind))
      continue;  // float weights read x
    int k = 0;
    while (k < n_kinds && kinds[k] != kind) ++k;
    if (k == n_kinds) {
      kinds[n_kinds] = kind;
      kind_act[n_kinds++] = &quantize_act(kind, x, n_tokens, ws[0].n_in, bufs[k], &pool);
    }
    acts[i] = kind_act[k];
  }
  if (n_tokens == 0) return;
  struct Chunk {
    int w;
    int64_t r0, r1;
  };
  thread_local std::vector<Chunk> chunk_buf;  // the caller's; workers read it through `chunks`
  std::vector<Chunk>& chunks = chunk_buf;
  chunks.clear();
  for (int i = 0; i < n_w; ++i) {
    const int64_t g = pool.n_threads() <= 1 ? std::max<int64_t>(1, ws[i].n_out)
                                            : row_grain(ws[i].n_out, pool.n_threads());
    for (int64_t r = 0; r < ws[i].n_out; r += g)
      chunks.push_back({i, r, std::min(r + g, ws[i].n_out)});
  }
  const auto run = [&](int, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const Chunk& ch = chunks[static_cast<size_t>(c)];
      fns[ch.w](ws[ch.w], acts[ch.w], x, n_tokens, ch.r0, ch.r1, ys[ch.w]);
    }
  };
  if (pool.n_threads() <= 1) return run(0, 0, static_cast<int64_t>(chunks.size()));
  pool.parallel_for_dynamic(static_cast<int64_t>(chunks.size()), 1, run);
}
}  // namespace

void matmul_cpu_isa(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                    ThreadPool& pool, CpuIsa isa) {
  matmul_rows(&w, 1, x, &y, n_tokens, pool, isa);
}

void matmul_cpu_multi(const WeightView* ws, int n_w, const float* x, float* const* ys,
                      int64_t n_tokens, ThreadPool& pool) {
  matmul_rows(ws, n_w, x, ys, n_tokens, pool, CpuIsa::kAuto);
}

void matmul_cpu(const WeightView& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool) {
  matmul_cpu_isa(w, x, y, n_tokens, pool, CpuIsa::kAuto);
}

}  // namespace tkv::kernels
