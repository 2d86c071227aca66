// KV codec throughput (single thread): encode, dequantize and rotated-domain
// dequantize for turbo k8v3/k8v4/k4v3/k4v2 and affine kv8/kv4 at head_dim
// 64/128/256, as GB/s of bf16 K+V processed (2 B x 2 x elements), beside a memcpy
// of the same bf16 bytes as the ceiling. Rows: 4096 (token x kv-head) per call.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kvcodec/kvcodec.h"

namespace {

using tkv::kernels::KvDequantParams;
using tkv::kernels::KvEncodeParams;
using tkv::quant::KvKind;
using tkv::quant::KvScheme;

constexpr int64_t kRows = 4096;

struct Setup {
  KvScheme s;
  std::vector<float> k, v, ko, vo;
  std::vector<uint8_t> rows;
  tkv::kernels::KvPlanes planes;
  explicit Setup(const KvScheme& scheme) : s(scheme) {
    const int64_t n = kRows * s.head_dim;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    k.resize(n), v.resize(n), ko.resize(n), vo.resize(n);
    for (int64_t i = 0; i < n; ++i) k[i] = nd(rng), v[i] = nd(rng);
    const auto l = tkv::quant::kv_row_layout(s);
    rows.resize(kRows * l.row_bytes);
    planes = tkv::kernels::kv_planes_interleaved(rows.data(), l);
    tkv::kernels::kvcodec_encode_ref({s, kRows, k.data(), v.data(), planes});
  }
};

tkv::ThreadPool& single() {
  static tkv::ThreadPool pool(1);
  return pool;
}

KvScheme scheme_of(int id, int d) {
  switch (id) {
    case 0:
      return {KvKind::kTurbo, 8, 3, d};
    case 1:
      return {KvKind::kTurbo, 8, 4, d};
    case 2:
      return {KvKind::kTurbo, 4, 3, d};
    case 3:
      return {KvKind::kTurbo, 4, 2, d};
    case 4:
      return {KvKind::kAffine, 8, 8, d};
    default:
      return {KvKind::kAffine, 4, 4, d};
  }
}

void finish(benchmark::State& st, const Setup& su) {
  st.SetBytesProcessed(st.iterations() * kRows * su.s.head_dim * 2 * 2);
  st.SetLabel(tkv::quant::kv_scheme_name(su.s) + " " + tkv::kernels::kvcodec_cpu_isa_name());
}

void BM_Encode(benchmark::State& st) {
  Setup su(scheme_of((int)st.range(0), (int)st.range(1)));
  for (auto _ : st) {
    tkv::kernels::kvcodec_encode_cpu({su.s, kRows, su.k.data(), su.v.data(), su.planes}, &single());
    benchmark::ClobberMemory();
  }
  finish(st, su);
}

void BM_Dequant(benchmark::State& st) {
  Setup su(scheme_of((int)st.range(0), (int)st.range(1)));
  const bool rotated = st.range(2) != 0;
  for (auto _ : st) {
    tkv::kernels::kvcodec_dequant_cpu({su.s, kRows, su.planes, su.ko.data(), su.vo.data(), rotated},
                                      &single());
    benchmark::ClobberMemory();
  }
  finish(st, su);
}

void BM_Memcpy(benchmark::State& st) {  // ceiling: copy the bf16 K+V bytes once
  const int64_t bytes = kRows * st.range(0) * 2 * 2;
  std::vector<uint8_t> src(bytes, 1), dst(bytes);
  for (auto _ : st) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * bytes);
}

void codec_args(benchmark::internal::Benchmark* b) {
  for (int id = 0; id < 6; ++id)
    for (int d : {64, 128, 256}) b->Args({id, d});
}
void dequant_args(benchmark::internal::Benchmark* b) {
  for (int id = 0; id < 6; ++id)
    for (int d : {64, 128, 256}) {
      b->Args({id, d, 0});
      if (id < 4) b->Args({id, d, 1});
    }
}

BENCHMARK(BM_Memcpy)->Arg(64)->Arg(128)->Arg(256);
BENCHMARK(BM_Encode)->Apply(codec_args);
BENCHMARK(BM_Dequant)->Apply(dequant_args);

}  // namespace

BENCHMARK_MAIN();
