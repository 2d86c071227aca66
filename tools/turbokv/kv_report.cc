// turbokv bench --kv-report: KV memory per scheme for the chosen model: bytes per
// token over all layers, the bytes a cache of --ctx tokens actually allocates,
// and the longest single-sequence context that fits in --kv-budget. Each scheme's
// figures come from an engine built for it (KvInfo, Engine::kv_max_context).
#include <cstdio>
#include <sstream>

#include "base/mem_info.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {

int run_kv_report(const CommonOptions& common, const std::string& budget_text,
                  const std::string& schemes_text) {
  auto budget = parse_byte_size(budget_text);
  if (!budget.ok() || budget.value() == 0) {
    std::fprintf(stderr, "error: [bench] bad --kv-budget '%s' (e.g. 8GiB, 512MiB, 2GB)\n",
                 budget_text.c_str());
    return 1;
  }
  auto path = resolve_model(common.model);
  if (!path.ok()) {
    std::fprintf(stderr, "error: %s\n", path.status().message().c_str());
    return 1;
  }
  std::vector<std::string> schemes;
  std::stringstream ss(schemes_text.empty()
                           ? "bf16,8,4,turbo:k8v8,turbo:k8v4,turbo:k8v3,turbo:k4v3,turbo:k4v2"
                           : schemes_text);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) schemes.push_back(x);
  CommonOptions resolved = common;
  resolved.model = path.value();
  // One sequence of --ctx tokens; --kv-budget is the report's budget, not the cache's.
  turbokv::EngineConfig cfg = engine_config(resolved, 1);
  cfg.kv_budget_bytes = 0;
  cfg.prefix_cache = false;
  size_t bf16_bpt = 0;
  bool header = false;
  for (const auto& s : schemes) {
    auto kv = turbokv::KvConfig::parse(s);
    if (!kv.ok()) {
      std::fprintf(stderr, "error: %s\n", kv.status().message().c_str());
      return 1;
    }
    cfg.kv = kv.value();
    auto eng = turbokv::Engine::create(cfg);
    if (!eng.ok()) {
      std::fprintf(stderr, "error: %s\n", eng.status().message().c_str());
      return 1;
    }
    const turbokv::ModelInfo& m = eng.value()->model_info();
    const turbokv::KvInfo k = eng.value()->kv_info();
    if (!header) {
      header = true;
      std::printf("model %s: %d layers, %d kv heads, head_dim %d; --ctx %lld, budget %s\n",
                  m.name.c_str(), m.n_layers, m.n_kv_heads, m.head_dim,
                  static_cast<long long>(common.ctx), budget_text.c_str());
      std::printf(
          "| kv | bytes/token (all layers) | vs bf16 | allocated for ctx (measured) | window "
          "bytes/seq | max ctx in budget |\n");
      std::printf("|---|---|---|---|---|---|\n");
    }
    if (cfg.kv.kind == turbokv::KvConfig::Kind::kBf16) bf16_bpt = k.bytes_per_token;
    std::printf(
        "| %s | %zu | %s | %zu | %zu | %lld |\n", k.scheme.c_str(), k.bytes_per_token,
        bf16_bpt ? fmt::format("{:.2f}x", static_cast<double>(bf16_bpt) / k.bytes_per_token).c_str()
                 : "-",
        k.allocated_bytes, k.window_bytes_per_seq,
        static_cast<long long>(eng.value()->kv_max_context(budget.value())));
  }
  return 0;
}

}  // namespace tkv::cli
