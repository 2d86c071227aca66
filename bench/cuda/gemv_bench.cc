// The decode GEMV benchmark: gemv_cuda on SmolLM2-135M, Gemma 3 270M, Qwen2.5-1.5B and
// Llama-3-8B matrix shapes in the types their GGUFs use, plus every type on the 8B
// ffn_up shape and 1..16 tokens on a few. Weights are random bytes (speed does not depend
// on the values); median µs over timed calls after an L2-evicting read (cold weights, as
// in a decode step); GB/s over the weight bytes, which the call must read once, against
// the device-to-device copy bandwidth (read + write) measured in the same process.
#include "bench/cuda/gemv_bench.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/status.h"
#include "bench/cuda/fill_cuda.h"
#include "bench/cuda/timing_cuda.h"
#include "device/cuda_check.h"
#include "device/device.h"
#include "kernels/matmul_cuda/matmul_cuda.h"

namespace tkv::bench {
namespace {

using ggml::Type;

struct GemvShape {
  const char* model;
  const char* matrix;
  Type type;
  int64_t n_in, n_out;
  int n_tokens;
};

std::vector<GemvShape> shapes(bool quick) {
  std::vector<GemvShape> s = {
      {"smollm2-135m", "attn_q", Type::kQ4_1, 576, 576, 1},
      {"smollm2-135m", "ffn_up", Type::kQ4_1, 576, 1536, 1},
      {"smollm2-135m", "ffn_down", Type::kQ4_1, 1536, 576, 1},
      {"smollm2-135m", "output", Type::kQ8_0, 576, 49152, 1},
      {"gemma3-270m", "ffn_up", Type::kQ5_0, 640, 2048, 1},
      {"gemma3-270m", "ffn_down", Type::kQ8_0, 2048, 640, 1},
      {"gemma3-270m", "output", Type::kQ8_0, 640, 262144, 1},
      {"qwen2.5-1.5b", "attn_q", Type::kQ4_K, 1536, 1536, 1},
      {"qwen2.5-1.5b", "ffn_up", Type::kQ4_K, 1536, 8960, 1},
      {"qwen2.5-1.5b", "ffn_down", Type::kQ6_K, 8960, 1536, 1},
      {"qwen2.5-1.5b", "output", Type::kQ6_K, 1536, 151936, 1},
      {"llama3-8b-shape", "attn_q", Type::kQ4_K, 4096, 4096, 1},
      {"llama3-8b-shape", "ffn_down", Type::kQ4_K, 14336, 4096, 1},
      {"llama3-8b-shape", "ffn_down", Type::kQ6_K, 14336, 4096, 1},
  };
  for (Type t : {Type::kQ4_0, Type::kQ4_1, Type::kQ5_0, Type::kQ8_0, Type::kQ4_K, Type::kQ5_K,
                 Type::kQ6_K, Type::kF16, Type::kBF16, Type::kF32})
    s.push_back({"llama3-8b-shape", "ffn_up", t, 4096, 14336, 1});
  for (int tokens : {2, 4, 8, 16}) {
    s.push_back({"llama3-8b-shape", "ffn_up", Type::kQ4_K, 4096, 14336, tokens});
    s.push_back({"llama3-8b-shape", "ffn_up", Type::kQ8_0, 4096, 14336, tokens});
    s.push_back({"qwen2.5-1.5b", "ffn_up", Type::kQ4_K, 1536, 8960, tokens});
  }
  if (quick) s.resize(14);
  return s;
}

using Variant = kernels::GemvCudaParams::Variant;

nlohmann::json bench_one(const GemvShape& s, double copy, int sm_count, int stage_bytes,
                         Variant variant) {
  const int64_t wbytes = (int64_t)ggml::row_bytes(s.type, s.n_in) * s.n_out;
  auto* w = static_cast<uint8_t*>(dmalloc(wbytes));
  auto* x = static_cast<float*>(dmalloc(s.n_in * s.n_tokens * 4));
  auto* y = static_cast<float*>(dmalloc(s.n_out * s.n_tokens * 4));
  TKV_CUDA_CHECK(fill_random_bytes(w, wbytes, 3));
  TKV_CUDA_CHECK(fill_random_f32(x, s.n_in * s.n_tokens, 4));
  kernels::GemvCudaParams p;
  p.w = w, p.type = s.type, p.n_in = s.n_in, p.n_out = s.n_out, p.n_tokens = s.n_tokens;
  p.x = x, p.y = y, p.sm_count = sm_count, p.stage_bytes = stage_bytes, p.variant = variant;
  kernels::cuda_detail::GemvPlan plan;
  TKV_CHECK(kernels::cuda_detail::gemv_plan(p, &plan));
  const double us = median_us(
      [&] {
        const Status st = kernels::gemv_cuda(p);
        TKV_CHECK(st.ok());
      },
      50);
  const double gbs = wbytes / (us * 1e-6) / 1e9;
  const char* tn = ggml::traits(s.type).name.data();
  std::printf(
      "| %s | %s | %s | %lld×%lld | %d | %s | %.1f | %.1f | %.0f | %.1f | %d×%d, %d thr, %d/SM, "
      "%d rows/stage |\n",
      s.model, s.matrix, tn, (long long)s.n_out, (long long)s.n_in, s.n_tokens,
      plan.warp ? "warp" : "block", wbytes / 1e6, us, gbs, 100.0 * gbs / copy, plan.grid_x,
      plan.grid_y, plan.threads, plan.blocks_per_sm, plan.rows_per_stage);
  TKV_CUDA_CHECK(cudaFree(w));
  TKV_CUDA_CHECK(cudaFree(x));
  TKV_CUDA_CHECK(cudaFree(y));
  return {{"model", s.model},
          {"matrix", s.matrix},
          {"type", tn},
          {"n_in", s.n_in},
          {"n_out", s.n_out},
          {"n_tokens", s.n_tokens},
          {"kernel", plan.warp ? "warp" : "block"},
          {"weight_bytes", wbytes},
          {"us", us},
          {"blocks_per_sm", plan.blocks_per_sm},
          {"rows_per_stage", plan.rows_per_stage},
          {"gbs", gbs},
          {"pct_copy", 100.0 * gbs / copy}};
}

}  // namespace

int run_gemv(const char* out_path, bool quick, const std::string& match, int stage_bytes) {
  cudaDeviceProp prop{};
  TKV_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy = copy_gbs();
  std::printf("%s, copy %.0f GB/s (D2D, read + write)\n\n", device::cuda_device_summary().c_str(),
              copy);
  std::printf(
      "| model | matrix | type | n_out×n_in | tokens | kernel | MB | µs | GB/s | %% of copy | grid "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  nlohmann::json j = {{"gpu", prop.name}, {"copy_gbs", copy}, {"rows", nlohmann::json::array()}};
  for (const GemvShape& s : shapes(quick)) {
    const std::string label = std::string(s.model) + " " + s.matrix + " " +
                              ggml::traits(s.type).name.data() + " " + std::to_string(s.n_tokens);
    if (label.find(match) == std::string::npos) continue;
    // Both kernels where the warp kernel takes the shape, side by side.
    kernels::GemvCudaParams q;
    q.type = s.type, q.n_in = s.n_in, q.n_out = s.n_out, q.n_tokens = s.n_tokens;
    q.sm_count = prop.multiProcessorCount, q.variant = Variant::kWarp;
    kernels::cuda_detail::GemvPlan plan;
    if (kernels::cuda_detail::gemv_plan(q, &plan))
      j["rows"].push_back(
          bench_one(s, copy, prop.multiProcessorCount, stage_bytes, Variant::kWarp));
    j["rows"].push_back(bench_one(s, copy, prop.multiProcessorCount, stage_bytes, Variant::kBlock));
  }
  std::ofstream(out_path) << j.dump(1) << "\n";
  std::printf("wrote %s\n", out_path);
  return 0;
}

}  // namespace tkv::bench
