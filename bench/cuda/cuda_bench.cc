// H200 benchmark of the CUDA decode attention (turbo k8v3/k8v4/k4v3/k4v2 and
// turbokv bf16) at the Llama-3-8B attention shape (32 q heads, 8 kv heads, d 128),
// batch {1,8,32} x context {4k,32k,128k}: median µs over timed calls (CUDA events),
// GB/s on the bytes read (decode_bytes_read) and % of the measured D2D copy
// bandwidth (read + write); plus encode throughput. Writes JSON (--out). --gemv: the
// decode GEMV over GGUF weights instead (gemv_bench.cc).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/status.h"
#include "bench/cuda/fill_cuda.h"
#include "bench/cuda/gemv_bench.h"
#include "bench/cuda/timing_cuda.h"
#include "device/cuda_check.h"
#include "device/device.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/kvcodec/kvcodec_cuda.h"

namespace tkv::bench {
namespace {

int g_page = 64;  // --page: tokens per page (64 = kvcache::CacheOptions' default; vLLM uses 16)
bool g_shuffle = true;  // --no-shuffle: pages of a sequence in allocation order
bool g_step = false;    // --step: also time encode + decode back to back, with and without PDL
bool g_reset = false;   // --reset-counters: the tensor-core path resets its merge counters per call
bool g_csr =
    false;  // --csr: a CSR page table (page_indptr) instead of the block table [batch, ctx/page]

// Read-only bandwidth: one kernel reading 2 GiB (no writes).
double read_gbs() {
  const int64_t n = int64_t(1) << 31;
  auto* a = static_cast<uint8_t*>(dmalloc(n + 16));
  TKV_CUDA_CHECK(fill_random_bytes(a, n, 1));
  const double us = median_us(
      [&] { TKV_CUDA_CHECK(flush_l2_by_reads(a, n, reinterpret_cast<uint32_t*>(a + n))); }, 20);
  TKV_CUDA_CHECK(cudaFree(a));
  return n / (us * 1e-6) / 1e9;
}

struct Scheme {
  const char* name;
  quant::KvScheme f;
};

nlohmann::json bench_decode(const Scheme& sc, int batch, int ctx, double copy, int sm_count,
                            int minb, bool general, int part) {
  const int n_kv = 8, n_heads = 32, page = g_page;
  const quant::KvScheme& f = sc.f;
  const int64_t pages = (int64_t)batch * ctx / page, rows = pages * page * n_kv;
  auto* k = static_cast<uint8_t*>(dmalloc(rows * quant::kv_row_layout_of(f).k_data_bytes));
  auto* v = static_cast<uint8_t*>(dmalloc(rows * quant::kv_row_layout_of(f).v_data_bytes));
  uint16_t* ks = nullptr;
  uint16_t* kz = nullptr;
  uint16_t* vs = nullptr;
  if (f.is_float()) {
    TKV_CUDA_CHECK(fill_random_bf16(reinterpret_cast<uint16_t*>(k), rows * f.head_dim, 2));
    TKV_CUDA_CHECK(fill_random_bf16(reinterpret_cast<uint16_t*>(v), rows * f.head_dim, 3));
  } else {
    TKV_CUDA_CHECK(fill_random_bytes(k, rows * quant::kv_row_layout_of(f).k_data_bytes, 2));
    TKV_CUDA_CHECK(fill_random_bytes(v, rows * quant::kv_row_layout_of(f).v_data_bytes, 3));
    ks = static_cast<uint16_t*>(dmalloc(rows * (f.head_dim / quant::kTurboGroup) * 2));
    kz = static_cast<uint16_t*>(dmalloc(rows * (f.head_dim / quant::kTurboGroup) * 2));
    vs = static_cast<uint16_t*>(dmalloc(rows * (f.head_dim / quant::kTurboGroup) * 2));
    TKV_CUDA_CHECK(fill_random_f16(ks, rows * (f.head_dim / quant::kTurboGroup), 4, false));
    TKV_CUDA_CHECK(fill_random_f16(kz, rows * (f.head_dim / quant::kTurboGroup), 5, true));
    TKV_CUDA_CHECK(fill_random_f16(vs, rows * (f.head_dim / quant::kTurboGroup), 6, false));
  }
  // Page table: each sequence owns ctx/page pages, in a shuffled order (a used cache).
  std::vector<int32_t> indices(pages), indptr(batch + 1), lens(batch, ctx);
  std::iota(indices.begin(), indices.end(), 0);
  if (g_shuffle) std::shuffle(indices.begin(), indices.end(), std::mt19937(9));
  for (int s = 0; s <= batch; ++s) indptr[s] = s * (ctx / page);
  auto* d_indices = static_cast<int32_t*>(dmalloc(pages * 4));
  auto* d_indptr = static_cast<int32_t*>(dmalloc((batch + 1) * 4));
  auto* d_lens = static_cast<int32_t*>(dmalloc(batch * 4));
  TKV_CUDA_CHECK(cudaMemcpy(d_indices, indices.data(), pages * 4, cudaMemcpyHostToDevice));
  TKV_CUDA_CHECK(cudaMemcpy(d_indptr, indptr.data(), (batch + 1) * 4, cudaMemcpyHostToDevice));
  TKV_CUDA_CHECK(cudaMemcpy(d_lens, lens.data(), batch * 4, cudaMemcpyHostToDevice));
  auto* q = static_cast<uint16_t*>(dmalloc((int64_t)batch * n_heads * f.head_dim * 2));
  auto* out = static_cast<uint16_t*>(dmalloc((int64_t)batch * n_heads * f.head_dim * 2));
  TKV_CUDA_CHECK(fill_random_bf16(q, (int64_t)batch * n_heads * f.head_dim, 7));

  kernels::DecodeCudaParams p;
  p.kv = {{f, n_kv, page}, k, v, ks, kz, vs, d_indptr, d_indices, d_lens};
  if (!g_csr)
    p.kv.page_stride = ctx / page,
    p.kv.page_indptr = nullptr;  // the same entries as rows of ctx/page
  p.n_seqs = batch;
  p.n_heads = n_heads;
  p.max_seq_len = ctx;
  p.softmax_scale = 1.0f / std::sqrt((float)f.head_dim);
  p.q = q;
  p.out = out;
  p.sm_count = sm_count;
  p.min_blocks_per_sm = minb;
  p.general_kernel = general;
  p.partition_tokens = part;  // 0: auto
  // mma16 / mma8: the tensor-core kernel with 16 (1 block/SM) or 8 consumer warps per block
  const int mma_warps = kernels::decode_plan(p).mma_warps;
  const char* kernel = !kernels::decode_uses_tensor_cores(p) ? "fp32"
                       : mma_warps == 16                     ? "mma16"
                                                             : "mma8";
  p.workspace_bytes = kernels::decode_workspace_bytes(p);
  p.workspace = dmalloc(p.workspace_bytes);
  if (!g_reset) {  // merge counters kept across calls, as an engine keeps them (zeroed once)
    p.merge_counters = static_cast<int*>(dmalloc((int64_t)batch * n_heads * sizeof(int)));
    TKV_CUDA_CHECK(cudaMemset(p.merge_counters, 0, (size_t)batch * n_heads * sizeof(int)));
  }
  const int iters = ctx * (int64_t)batch >= 32 * 131072 / 2 ? 10 : 30;
  auto call = [&] {
    const Status st = kernels::decode_attention_cuda(p);
    TKV_CHECK(st.ok());
  };
  const double us = median_us(call, iters);
  const double us_idle = median_us(call, iters, /*flush=*/false);  // + the host's launch latency
  // --step: a decode step's attention part, the encode of each sequence's new token into its
  // last slot and the decode after it, back to back (flush before; events around both), with a
  // plain and a programmatic (PDL) decode launch; the encode alone for the difference.
  double step_us = 0, step_pdl_us = 0, enc_us = 0;
  const bool step =
      g_step && !f.is_float() && p.merge_counters && kernels::decode_uses_tensor_cores(p);
  if (step) {
    const int64_t n_new = (int64_t)batch * n_kv * f.head_dim;
    auto* kn = static_cast<float*>(dmalloc(n_new * 4));
    auto* vn = static_cast<float*>(dmalloc(n_new * 4));
    TKV_CUDA_CHECK(fill_random_f32(kn, n_new, 13));
    TKV_CUDA_CHECK(fill_random_f32(vn, n_new, 14));
    std::vector<int32_t> slots(batch);
    for (int s = 0; s < batch; ++s)
      slots[s] = indices[(int64_t)s * (ctx / page) + (ctx - 1) / page] * page + (ctx - 1) % page;
    auto* d_slots = static_cast<int32_t*>(dmalloc(batch * 4));
    TKV_CUDA_CHECK(cudaMemcpy(d_slots, slots.data(), batch * 4, cudaMemcpyHostToDevice));
    kernels::KvEncodeCudaParams ep;
    ep.cache = p.kv;
    ep.n_tokens = batch, ep.k = kn, ep.v = vn, ep.slot_mapping = d_slots;
    auto enc = [&] { TKV_CHECK(kernels::kvcodec_encode_cuda(ep).ok()); };
    enc_us = median_us(enc, iters);
    step_us = median_us([&] { enc(), call(); }, iters);
    p.programmatic_launch = true;
    step_pdl_us = median_us([&] { enc(), call(); }, iters);
    p.programmatic_launch = false;
    for (void* ptr : std::initializer_list<void*>{kn, vn, d_slots}) TKV_CUDA_CHECK(cudaFree(ptr));
    std::printf(
        "step     %-5s B=%-3d ctx=%-6d encode %.1f us; encode + decode %.1f us, with PDL %.1f us\n",
        sc.name, batch, ctx, enc_us, step_us, step_pdl_us);
  }
  const int64_t bytes = kernels::decode_bytes_read(p, lens.data());
  const kernels::DecodePlan plan = kernels::decode_plan(p);
  for (void* ptr : std::initializer_list<void*>{k, v, ks, kz, vs, d_indices, d_indptr, d_lens, q,
                                                out, p.workspace, (void*)p.merge_counters})
    if (ptr) TKV_CUDA_CHECK(cudaFree(ptr));
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf(
      "turbokv  %-5s B=%-3d ctx=%-6d %9.1f us %7.0f GB/s %5.1f%% copy  (idle GPU %.1f us; split %d "
      "x %d tok, %s%s, page %d%s)\n",
      sc.name, batch, ctx, us, gbs, 100.0 * gbs / copy, us_idle, plan.n_parts,
      plan.partition_tokens, kernel, minb ? ", minb 3" : "", g_page, g_csr ? ", csr" : "");
  return {{"impl", "turbokv"},
          {"scheme", sc.name},
          {"batch", batch},
          {"ctx", ctx},
          {"us", us},
          {"gbs", gbs},
          {"us_idle", us_idle},
          {"pct_copy", 100.0 * gbs / copy},
          {"bytes", bytes},
          {"n_parts", plan.n_parts},
          {"partition_tokens", plan.partition_tokens},
          {"min_blocks_per_sm", minb},
          {"kernel", kernel},
          {"counters", g_reset ? "reset per call" : "kept"},
          {"page", g_page},
          {"page_table", g_csr ? "csr" : "block table"},
          {"step_encode_us", enc_us},
          {"step_us", step_us},
          {"step_pdl_us", step_pdl_us}};
}

nlohmann::json bench_encode(const Scheme& sc) {
  const int n_tokens = 16384, n_kv = 8, d = sc.f.head_dim;
  const int64_t rows = (int64_t)n_tokens * n_kv;
  auto* k = static_cast<float*>(dmalloc(rows * d * 4));
  auto* v = static_cast<float*>(dmalloc(rows * d * 4));
  TKV_CUDA_CHECK(fill_random_f32(k, rows * d, 11));
  TKV_CUDA_CHECK(fill_random_f32(v, rows * d, 12));
  std::vector<int32_t> slots(n_tokens);
  std::iota(slots.begin(), slots.end(), 0);
  auto* d_slots = static_cast<int32_t*>(dmalloc(n_tokens * 4));
  TKV_CUDA_CHECK(cudaMemcpy(d_slots, slots.data(), n_tokens * 4, cudaMemcpyHostToDevice));
  kernels::KvEncodeCudaParams p;
  p.cache.format = {sc.f, n_kv, 16};
  p.cache.k_data =
      static_cast<uint8_t*>(dmalloc(rows * quant::kv_row_layout_of(sc.f).k_data_bytes));
  p.cache.v_data =
      static_cast<uint8_t*>(dmalloc(rows * quant::kv_row_layout_of(sc.f).v_data_bytes));
  p.cache.k_scale =
      static_cast<uint16_t*>(dmalloc(rows * (sc.f.head_dim / quant::kTurboGroup) * 2));
  p.cache.k_zero = static_cast<uint16_t*>(dmalloc(rows * (sc.f.head_dim / quant::kTurboGroup) * 2));
  p.cache.v_scale =
      static_cast<uint16_t*>(dmalloc(rows * (sc.f.head_dim / quant::kTurboGroup) * 2));
  p.n_tokens = n_tokens;
  p.k = k;
  p.v = v;
  p.slot_mapping = d_slots;
  const double us = median_us([&] { TKV_CHECK(kernels::kvcodec_encode_cuda(p).ok()); }, 20);
  const int64_t bytes = rows * (2 * d * 4 + quant::kv_row_layout_of(sc.f).row_bytes);
  for (void* ptr : std::initializer_list<void*>{k, v, d_slots, p.cache.k_data, p.cache.v_data,
                                                p.cache.k_scale, p.cache.k_zero, p.cache.v_scale})
    TKV_CUDA_CHECK(cudaFree(ptr));
  const double tok_s = n_tokens / (us * 1e-6);
  std::printf(
      "encode   %-5s %d tokens x %d kv heads: %.1f us, %.2f M tokens/s, %.0f GB/s (fp32 in + cache "
      "out)\n",
      sc.name, n_tokens, n_kv, us, tok_s / 1e6, bytes / (us * 1e-6) / 1e9);
  return {{"scheme", sc.name},
          {"n_tokens", n_tokens},
          {"n_kv_heads", n_kv},
          {"head_dim", d},
          {"us", us},
          {"tokens_per_s", tok_s},
          {"gbs", bytes / (us * 1e-6) / 1e9}};
}

int run(int argc, char** argv) {
  std::string out_path = "cuda_bench.json";
  bool quick = false, encode = true, general = false, no_copy = false, gemv = false;
  // --prealloc G: allocate, write and free G GiB first (tests whether an earlier large
  // allocation slows later schemes: docs/bench/cuda.md, "Sweep order").
  double prealloc_gib = 0;
  std::string only_scheme, match;
  int only_batch = 0, only_ctx = 0, minb = 0, part = 0, stage = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    if (a == "--quick") quick = true;
    if (a == "--no-encode") encode = false;
    if (a == "--general") general = true;  // never the tensor-core path
    if (a == "--scheme" && i + 1 < argc) only_scheme = argv[++i];
    if (a == "--batch" && i + 1 < argc) only_batch = std::atoi(argv[++i]);
    if (a == "--ctx" && i + 1 < argc) only_ctx = std::atoi(argv[++i]);
    if (a == "--minb" && i + 1 < argc) minb = std::atoi(argv[++i]);
    if (a == "--part" && i + 1 < argc)
      part = std::atoi(argv[++i]);  // tokens per partition (multiple of 64)
    if (a == "--page" && i + 1 < argc) g_page = std::atoi(argv[++i]);
    if (a == "--no-shuffle") g_shuffle = false;
    if (a == "--reset-counters") g_reset = true;
    if (a == "--csr") g_csr = true;
    if (a == "--step") g_step = true;
    if (a == "--no-copy") no_copy = true;
    if (a == "--prealloc" && i + 1 < argc) prealloc_gib = std::atof(argv[++i]);
    if (a == "--gemv") gemv = true;  // the decode GEMV instead (gemv_bench.cc)
    if (a == "--match" && i + 1 < argc) match = argv[++i];  // --gemv: shapes whose label has it
    if (a == "--stage" && i + 1 < argc) stage = std::atoi(argv[++i]);  // --gemv: stage bytes
  }
  if (device::cuda_device_count() == 0) {
    std::fprintf(stderr, "tkv_cuda_bench: %s\n", device::cuda_device_summary().c_str());
    return 2;
  }
  if (gemv) return run_gemv(out_path.c_str(), quick, match, stage);
  cudaDeviceProp prop{};
  TKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prealloc_gib > 0) {
    const int64_t n = (int64_t)(prealloc_gib * (1 << 30));
    void* big = dmalloc(n);
    TKV_CUDA_CHECK(cudaMemset(big, 1, n));
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    TKV_CUDA_CHECK(cudaFree(big));
    std::printf("prealloc: %.1f GiB allocated, written and freed\n", prealloc_gib);
  }
  const double copy =
      no_copy ? 1.0 : copy_gbs();  // --no-copy: sweeps; "% of copy" then meaningless
  const double rd = no_copy ? 1.0 : read_gbs();
  std::printf("%s, copy %.0f GB/s (D2D, read + write), read-only %.0f GB/s\n",
              device::cuda_device_summary().c_str(), copy, rd);
  const std::vector<Scheme> schemes = {{"k8v3", {quant::KvKind::kTurbo, 8, 3, 128}},
                                       {"k8v4", {quant::KvKind::kTurbo, 8, 4, 128}},
                                       {"k4v3", {quant::KvKind::kTurbo, 4, 3, 128}},
                                       {"k4v2", {quant::KvKind::kTurbo, 4, 2, 128}},
                                       {"bf16", {quant::KvKind::kBf16, 16, 16, 128}}};
  nlohmann::json j = {
      {"gpu", prop.name},
      {"copy_gbs", copy},
      {"read_gbs", rd},
      {"rows", nlohmann::json::array()},
      {"encode", nlohmann::json::array()},
      {"shape", "n_heads 32, n_kv_heads 8, head_dim 128, page " + std::to_string(g_page)}};
  for (const Scheme& sc : schemes) {
    const std::vector<int> batches =
        only_batch ? std::vector<int>{only_batch} : std::vector<int>{1, 8, 32};
    const std::vector<int> ctxs =
        only_ctx ? std::vector<int>{only_ctx} : std::vector<int>{4096, 32768, 131072};
    for (int batch : batches) {
      for (int ctx : ctxs) {
        if (quick && !(batch == 8 && ctx == 32768) && !(batch == 1 && ctx == 131072)) continue;
        if ((!only_scheme.empty() && only_scheme != sc.name) ||
            (only_batch && only_batch != batch) || (only_ctx && only_ctx != ctx))
          continue;
        j["rows"].push_back(
            bench_decode(sc, batch, ctx, copy, prop.multiProcessorCount, minb, general, part));
      }
    }
  }
  for (const Scheme& sc : schemes) {
    if (encode && (only_scheme.empty() || only_scheme == sc.name))
      j["encode"].push_back(bench_encode(sc));
  }
  std::ofstream(out_path) << j.dump(1) << "\n";
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}

}  // namespace
}  // namespace tkv::bench

int main(int argc, char** argv) {
  return tkv::bench::run(argc, argv);
}
