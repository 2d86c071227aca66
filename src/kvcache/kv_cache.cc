// create_cache: the single place that maps a --kv-quant scheme to a cache
// implementation, plus the one parser of the --kv-* flag values and the memory
// model behind `turbokv bench --kv-report`.
#include "kvcache/kv_cache.h"

#include "kvcache/kv_layout.h"
#include "kvcache/paged_cache.h"

namespace tkv::kv {

Result<quant::KvScheme> parse_kv_quant(std::string_view text) {
  // head_dim 128 is valid for every scheme: only the spelling is checked here.
  auto r = quant::parse_kv_scheme(text, 128);
  if (!r.ok()) return invalid_argument("[kvcache] bad --kv-quant: {}", r.status().message());
  return r;
}

Result<bool> parse_swa_mode(const std::string& text) {
  if (text == "quant") return false;
  if (text == "bf16") return true;
  return invalid_argument("[kvcache] unknown --kv-quant-swa '{}' (valid: quant | bf16)", text);
}

Result<KvMemoryModel> kv_memory_model(const KvShape& shape, const CacheOptions& opts) {
  TKV_ASSIGN_OR_RETURN(CacheLayout lay, plan_cache_layout(shape, opts));
  return lay.memory;
}

int64_t kv_max_context(const KvMemoryModel& m, size_t budget_bytes) {
  if (budget_bytes <= m.window_bytes_per_seq) return 0;
  size_t left = budget_bytes - m.window_bytes_per_seq;
  if (m.full_bytes_per_token == 0) return INT64_MAX;
  const size_t prefix = static_cast<size_t>(m.prefix_tokens) * m.prefix_bytes_per_token;
  if (m.prefix_tokens > 0 && left <= prefix)
    return static_cast<int64_t>(left / m.prefix_bytes_per_token);
  left -= prefix;
  return m.prefix_tokens + static_cast<int64_t>(left / m.full_bytes_per_token);
}

Result<std::unique_ptr<KvCache>> create_cache(const KvShape& shape, const CacheOptions& opts) {
  return create_paged_cache(shape, opts);
}

}  // namespace tkv::kv
