// CPU matmul speed on the real shapes of SmolLM2-135M (Q4_1, Q8_0 vocab) and
// Qwen2.5-1.5B (Q4_K, Q6_K), Gemma-3 (Q5_0): matvec (decode) over a weight set
// larger than L3, rotated per iteration, and 512-token prefill. Reports GB/s of
// weight bytes and GFLOP/s; StreamRead / Memcpy give the bandwidth ceiling.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul/matmul.h"
#include "quant/ggml_blocks.h"
#include "quant/half.h"

namespace {

using tkv::ggml::Type;
constexpr size_t kOutOfCacheBytes = size_t{256} << 20;  // 8x L3: every matvec reads from DRAM

tkv::ThreadPool& pool_for(int n) {
  static std::unique_ptr<tkv::ThreadPool> pools[9];
  if (!pools[n]) pools[n] = std::make_unique<tkv::ThreadPool>(n);
  return *pools[n];
}

// Random codes with sane fp16 scales (offsets of the scale fields per block type).
std::vector<uint8_t> make_weights(Type type, int64_t n_in, int64_t n_out, int copies) {
  const size_t rb = tkv::ggml::row_bytes(type, n_in),
               bytes = rb * static_cast<size_t>(n_out) * copies;
  std::vector<uint8_t> buf(bytes);
  std::mt19937 rng(42);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    const uint32_t r = rng();
    std::memcpy(&buf[i], &r, 4);
  }
  const auto& tr = tkv::ggml::traits(type);
  size_t off[2] = {0, 2};
  int n_f16 = 1;
  if (type == Type::kQ4_1 || type == Type::kQ5_1 || type == Type::kQ4_K || type == Type::kQ5_K)
    n_f16 = 2;
  if (type == Type::kQ6_K) off[0] = offsetof(tkv::ggml::BlockQ6_K, d);
  const uint16_t h = tkv::f32_to_f16(0.01f);
  for (size_t b = 0; b + tr.block_bytes <= bytes; b += tr.block_bytes)
    for (int k = 0; k < n_f16; ++k) std::memcpy(&buf[b + off[k]], &h, 2);
  return buf;
}

void BM_StreamRead(benchmark::State& st) {
  std::vector<uint8_t> buf(kOutOfCacheBytes, 1);
  tkv::ThreadPool& pool = pool_for(static_cast<int>(st.range(0)));
  const int64_t n_lines = static_cast<int64_t>(buf.size() / 64);
  for (auto _ : st) {
    pool.parallel_for(n_lines, [&](int, int64_t b, int64_t e) {
      __m256i acc = _mm256_setzero_si256();
      for (int64_t i = b; i < e; ++i) {
        const __m256i* p = reinterpret_cast<const __m256i*>(buf.data() + i * 64);
        acc = _mm256_add_epi64(acc,
                               _mm256_add_epi64(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1)));
      }
      benchmark::DoNotOptimize(acc);
    });
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(buf.size()));
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->UseRealTime();

void BM_Memcpy(benchmark::State& st) {
  std::vector<uint8_t> a(kOutOfCacheBytes / 2, 1), b(kOutOfCacheBytes / 2);
  for (auto _ : st) {
    std::memcpy(b.data(), a.data(), a.size());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(a.size()));
}
BENCHMARK(BM_Memcpy)->UseRealTime();

// Args: type, n_in, n_out, n_tokens, threads.
void BM_Matmul(benchmark::State& st) {
  const Type type = static_cast<Type>(st.range(0));
  const int64_t n_in = st.range(1), n_out = st.range(2), n_tokens = st.range(3);
  const size_t mat_bytes = tkv::ggml::row_bytes(type, n_in) * static_cast<size_t>(n_out);
  // Decode steps (up to 16 tokens): rotate through copies so the working set exceeds L3, as
  // the weights stream from memory in a real step; prefill is compute-bound, one copy.
  const int copies =
      n_tokens <= 16 ? static_cast<int>((kOutOfCacheBytes + mat_bytes - 1) / mat_bytes) : 1;
  const std::vector<uint8_t> w = make_weights(type, n_in, n_out, copies);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens)),
      y(static_cast<size_t>(n_out * n_tokens));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : x) v = u(rng);
  tkv::ThreadPool& pool = pool_for(static_cast<int>(st.range(4)));
  int c = 0;
  for (auto _ : st) {
    const tkv::kernels::WeightView wv{w.data() + mat_bytes * static_cast<size_t>(c), type, n_in,
                                      n_out};
    tkv::kernels::matmul_cpu(wv, x.data(), y.data(), n_tokens, pool);
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(mat_bytes));
  st.counters["GFLOPs"] = benchmark::Counter(2.0 * n_in * n_out * n_tokens * st.iterations() * 1e-9,
                                             benchmark::Counter::kIsRate);
  st.SetLabel(std::string(tkv::ggml::traits(type).name) +
              (copies > 1 ? " out-of-cache" : " in-cache"));
}

void matmul_args(benchmark::internal::Benchmark* b) {
  struct Shape {
    Type type;
    int64_t n_in, n_out;
    bool prefill;
  };
  const Shape shapes[] = {
      {Type::kQ4_1, 576, 1536, true},     {Type::kQ4_1, 1536, 576, true},
      {Type::kQ4_1, 576, 576, true},      {Type::kQ4_1, 576, 192, true},
      {Type::kQ8_0, 576, 49152, false},                                   // SmolLM2-135M
      {Type::kQ5_0, 640, 2048, true},     {Type::kQ8_0, 640, 256, true},  // Gemma-3-270M
      {Type::kQ4_K, 1536, 8960, true},    {Type::kQ6_K, 8960, 1536, true},
      {Type::kQ4_K, 8960, 1536, true},    {Type::kQ4_K, 1536, 1536, true},
      {Type::kQ6_K, 1536, 151936, false},  // Qwen2.5-1.5B
      {Type::kF16, 576, 1536, false},     {Type::kQ5_K, 1536, 8960, false},
  };
  for (const Shape& s : shapes) {
    for (int threads : {1, 2}) {
      // 1: decode of one sequence; 2-16: a batched or speculative (verify) decode step;
      // 512: prefill.
      for (int64_t n : {1, 2, 4, 8, 16})
        b->Args({static_cast<int64_t>(s.type), s.n_in, s.n_out, n, threads});
      if (s.prefill) b->Args({static_cast<int64_t>(s.type), s.n_in, s.n_out, 512, threads});
    }
  }
}
BENCHMARK(BM_Matmul)
    ->Apply(matmul_args)
    ->ArgNames({"type", "n_in", "n_out", "n_tokens", "thr"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
