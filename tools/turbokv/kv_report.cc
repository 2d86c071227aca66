// turbokv bench --kv-report: KV memory per scheme for the loaded model: bytes per
// token over all layers, the bytes a cache of --ctx tokens actually allocates,
// and the longest single-sequence context that fits in --kv-budget.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/mem_info.h"
#include "kvcache/kv_cache.h"
#include "runtime/kv_sizing.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {

// "8GiB", "512MiB", "2G" -> bytes (base/mem_info.h); 0 on a malformed value.
size_t parse_bytes(const std::string& s) {
  auto r = parse_byte_size(s);
  return r.ok() ? r.value() : 0;
}

}  // namespace

size_t kv_bytes_for_tokens(const kv::KvMemoryModel& m, int64_t n) {
  return runtime::kv_bytes_for_tokens(m, n);
}

void print_kv_summary(runtime::Engine& eng, const CommonOptions& o, int seq) {
  const auto& kv = eng.cache();
  const int64_t n = kv.seq_len(seq);
  auto m = kv::kv_memory_model(kv.shape(), cache_options(o));
  const size_t used = m.ok() ? kv_bytes_for_tokens(m.value(), n) : kv.bytes_per_token() * n;
  const std::string start = o.kv_quant_start > 0 && m.ok() && m.value().prefix_tokens > 0
                                ? fmt::format("; first {} tokens bf16, then {} B/token",
                                              o.kv_quant_start, kv.bytes_per_token())
                                : "";
  std::fprintf(stderr,
               "[turbokv] kv cache %s: %lld tokens, %zu bytes used (%.1f B/token%s), %.2f MiB "
               "allocated\n",
               kv.scheme_name().c_str(), static_cast<long long>(n), used,
               n > 0 ? static_cast<double>(used) / static_cast<double>(n) : 0.0, start.c_str(),
               static_cast<double>(kv.allocated_bytes()) / 1048576.0);
}

int run_kv_report(const CommonOptions& common, const std::string& budget_text,
                  const std::string& schemes_text) {
  const size_t budget = parse_bytes(budget_text);
  if (budget == 0) {
    std::fprintf(stderr, "error: [bench] bad --kv-budget '%s' (e.g. 8GiB, 512MiB, 2GB)\n",
                 budget_text.c_str());
    return 1;
  }
  auto eng = make_engine(common);
  if (!eng) return 1;
  const kv::KvShape shape = eng->model().kv_shape();
  std::vector<std::string> schemes;
  std::stringstream ss(schemes_text.empty()
                           ? "bf16,8,4,turbo:k8v8,turbo:k8v4,turbo:k8v3,turbo:k4v3,turbo:k4v2"
                           : schemes_text);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) schemes.push_back(x);
  std::printf("model %s: %d layers, %d kv heads, head_dim %d; --ctx %lld, budget %s\n",
              eng->model().config().name.c_str(), shape.n_layers, shape.n_kv_heads, shape.head_dim,
              static_cast<long long>(common.ctx), budget_text.c_str());
  std::printf(
      "| kv | bytes/token (all layers) | vs bf16 | allocated for ctx (measured) | window bytes/seq "
      "| max ctx in budget |\n");
  std::printf("|---|---|---|---|---|---|\n");
  size_t bf16_bpt = 0;
  for (const auto& s : schemes) {
    kv::CacheOptions o;
    o.scheme = s;
    o.max_tokens = common.ctx;
    o.max_seqs = 1;
    o.quant_start = common.kv_quant_start;
    o.swa_bf16 = common.kv_quant_swa == "bf16";
    o.max_chunk_tokens = common.ubatch;
    auto m = kv::kv_memory_model(shape, o);
    auto cache = kv::create_cache(shape, o);
    if (!m.ok() || !cache.ok()) {
      std::fprintf(stderr, "error: %s\n", (m.ok() ? cache.status() : m.status()).message().c_str());
      return 1;
    }
    if (s == "bf16") bf16_bpt = m.value().bytes_per_token;
    const int64_t max_ctx = kv::kv_max_context(m.value(), budget);
    std::printf(
        "| %s | %zu | %s | %zu | %zu | %lld |\n", cache.value()->scheme_name().c_str(),
        m.value().bytes_per_token,
        bf16_bpt ? fmt::format("{:.2f}x", static_cast<double>(bf16_bpt) / m.value().bytes_per_token)
                       .c_str()
                 : "-",
        cache.value()->allocated_bytes(), m.value().window_bytes_per_seq,
        static_cast<long long>(max_ctx));
  }
  return 0;
}

}  // namespace tkv::cli
