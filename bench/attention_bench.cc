// Attention-only decode cost over a paged KV cache, 2 threads: time per token
// (one query row, all heads of one layer) and
// achieved GB/s of KV bytes read, per scheme (bf16, affine kv8/kv4, turbo
// k8v4/k8v3/k4v3, and the symmetric-key / absmax-value forms of k8v4 and k4v4: k8sv4,
// k8sv4a, k4sv4, k4sv4a), path (fused = attention_paged_fused_cpu as picked at run time;
// fused-fp32v = its AVX-512 loop with fp32 V accumulation; reference =
// dequantize + attention_f32_ref; bf16-base = the lead's attention_bf16_cpu) and
// context 512/2k/8k, at the SmolLM2-135M (9 q / 3 kv heads, d64) and
// Qwen2.5-1.5B (12 q / 2 kv heads, d128) attention shapes.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/half.h"

namespace {

using namespace tkv;
using kernels::KvSegmentView;

struct Shape {
  const char* name;
  int n_heads, n_kv_heads, head_dim;
};
constexpr Shape kShapes[] = {{"smollm2", 9, 3, 64}, {"qwen1.5b", 12, 2, 128}};
constexpr int kPage = 64;

struct Scheme {
  const char* name;
  bool is_bf16;
  quant::KvKind kind;
  int kb, vb;
  bool sym = false, absmax = false;  // KvScheme::k_symmetric, v_absmax
};
constexpr Scheme kSchemes[] = {{"bf16", true, quant::KvKind::kBf16, 16, 16},
                               {"kv8", false, quant::KvKind::kAffine, 8, 8},
                               {"kv4", false, quant::KvKind::kAffine, 4, 4},
                               {"k8v4", false, quant::KvKind::kTurbo, 8, 4},
                               {"k8v3", false, quant::KvKind::kTurbo, 8, 3},
                               {"k4v3", false, quant::KvKind::kTurbo, 4, 3},
                               {"k8sv4", false, quant::KvKind::kTurbo, 8, 4, true},
                               {"k8sv4a", false, quant::KvKind::kTurbo, 8, 4, true, true},
                               {"k4sv4", false, quant::KvKind::kTurbo, 4, 4, true},
                               {"k4sv4a", false, quant::KvKind::kTurbo, 4, 4, true, true}};

// 2 threads (the target machine); TKV_BENCH_THREADS overrides, e.g. 1 to see pure compute.
ThreadPool& pool2() {
  static ThreadPool pool(
      std::getenv("TKV_BENCH_THREADS") ? std::atoi(std::getenv("TKV_BENCH_THREADS")) : 2);
  return pool;
}

// A filled cache of n_ctx tokens in the segment layout (and, for bf16, the
// lead's [page, page_size, n_kv_heads, d] layout too), plus one query row.
struct Fixture {
  std::vector<uint8_t> pool;
  std::vector<uint16_t> k16, v16;
  std::vector<int32_t> pages;
  std::vector<float> q, out;
  KvSegmentView view;
  int64_t row_bytes = 0;

  Fixture(const Shape& sh, const Scheme& sc, int64_t n_ctx) {
    const int d = sh.head_dim, nkv = sh.n_kv_heads;
    quant::KvScheme s{sc.kind, sc.kb, sc.vb, d};
    s.k_symmetric = sc.sym;
    s.v_absmax = sc.absmax;
    const kernels::KvPageFormat fmt{s, nkv, kPage};
    row_bytes = fmt.rows().row_bytes;
    const int64_t n_pages = (n_ctx + kPage - 1) / kPage;
    pool.assign(static_cast<size_t>(n_pages * nkv * kPage * row_bytes + kernels::kKvPoolTailPad),
                0);
    for (int64_t p = 0; p < n_pages; ++p) pages.push_back(static_cast<int32_t>(n_pages - 1 - p));
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> k(static_cast<size_t>(d)), v(k.size());
    if (sc.is_bf16)
      k16.resize(static_cast<size_t>(n_pages * kPage * nkv * d)), v16.resize(k16.size());
    for (int64_t t = 0; t < n_ctx; ++t)
      for (int h = 0; h < nkv; ++h) {
        for (int e = 0; e < d; ++e)
          k[static_cast<size_t>(e)] = nd(rng), v[static_cast<size_t>(e)] = nd(rng);
        const int64_t page = pages[static_cast<size_t>(t / kPage)];
        uint8_t* row = pool.data() + ((page * nkv + h) * kPage + t % kPage) * row_bytes;
        if (sc.is_bf16) {
          auto* r16 = reinterpret_cast<uint16_t*>(row);
          const size_t base = static_cast<size_t>(((page * kPage + t % kPage) * nkv + h) * d);
          for (int e = 0; e < d; ++e) {
            r16[e] = k16[base + static_cast<size_t>(e)] = f32_to_bf16(k[static_cast<size_t>(e)]);
            r16[d + e] = v16[base + static_cast<size_t>(e)] =
                f32_to_bf16(v[static_cast<size_t>(e)]);
          }
          continue;
        }
        kernels::KvEncodeParams ep;
        ep.scheme = s;
        ep.n_rows = 1;
        ep.k = k.data();
        ep.v = v.data();
        ep.out = kernels::kv_planes_interleaved(row, quant::kv_row_layout(s));
        kernels::kvcodec_encode_ref(ep);
      }
    q.resize(static_cast<size_t>(sh.n_heads * d));
    for (auto& x : q) x = nd(rng);
    out.resize(q.size());
    view = {fmt, pool.data(), pages.data(), 0, n_ctx};
  }
};

enum Path { kFused, kFusedFp32V, kReference, kBf16Base };

void bm_attention(benchmark::State& state, Shape sh, Scheme sc, int64_t n_ctx, Path path) {
  Fixture f(sh, sc, n_ctx);
  kernels::AttnArgs a{f.q.data(), f.out.data(), 1, sh.n_heads, n_ctx - 1, 0, 0.125f};
  kernels::PagedBf16View bv{f.k16.data(),  f.v16.data(), f.pages.data(), kPage,
                            sh.n_kv_heads, sh.head_dim,  n_ctx};
  for (auto _ : state) {
    if (path == kFused) kernels::attention_paged_fused_cpu(&f.view, 1, a, pool2());
    if (path == kFusedFp32V)
      kernels::attention_paged_fused_cpu(&f.view, 1, a, pool2(), kernels::FusedIsa::kAvx512);
    if (path == kReference) kernels::attention_paged_ref(&f.view, 1, a);
    if (path == kBf16Base) kernels::attention_bf16_cpu(bv, a, pool2());
    benchmark::DoNotOptimize(f.out.data());
  }
  const double kv_bytes = static_cast<double>(n_ctx * sh.n_kv_heads * f.row_bytes);
  state.counters["GB/s"] = benchmark::Counter(
      kv_bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

const int kRegistered = [] {
  for (const Shape& sh : kShapes)
    for (int64_t ctx : {512, 2048, 8192})
      for (const Scheme& sc : kSchemes)
        for (Path p : {kFused, kFusedFp32V, kReference, kBf16Base}) {
          if (p == kBf16Base && !sc.is_bf16) continue;
          if (p == kFusedFp32V && (sc.is_bf16 || !kernels::fused_has_avx512())) continue;
          const char* pn = p == kFused        ? "fused"
                           : p == kFusedFp32V ? "fused-fp32v"
                           : p == kReference  ? "reference"
                                              : "bf16-base";
          const std::string name =
              std::string(sh.name) + "/" + sc.name + "/" + pn + "/ctx" + std::to_string(ctx);
          benchmark::RegisterBenchmark(name.c_str(), bm_attention, sh, sc, ctx, p)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
