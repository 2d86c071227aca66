// size_kv_pool (see kv_sizing.h): bisection over the pool's token count on the
// cache's own layout plan, so the figure matches what the cache allocates.
#include "runtime/kv_sizing.h"

#include <algorithm>

#include "kvcache/kv_layout.h"

namespace tkv::runtime {

Result<KvSizing> size_kv_pool(const kv::KvShape& shape, kv::CacheOptions base, int64_t context,
                              int max_seqs, int64_t step_tokens, const std::string& model_name,
                              size_t model_bytes) {
  if (context < 1 || context > kv::kMaxCacheTokens)
    return invalid_argument("[engine] context {} out of range (valid: 1 to {})", context,
                            kv::kMaxCacheTokens);
  if (max_seqs < 1 || max_seqs > kv::kMaxCacheSeqs)
    return invalid_argument("[engine] max concurrent sequences {} out of range (valid: 1 to {})",
                            max_seqs, kv::kMaxCacheSeqs);
  if (step_tokens < max_seqs || step_tokens > kv::kMaxCacheTokens)
    return invalid_argument(
        "[engine] step token budget {} out of range (valid: max concurrent sequences ({}) to {}, "
        "so that every running sequence decodes each step)",
        step_tokens, max_seqs, kv::kMaxCacheTokens);
  base.max_seqs = max_seqs;
  base.max_chunk_tokens = step_tokens;
  if (base.budget_bytes == 0) base.budget_bytes = kv::default_kv_budget(model_bytes);
  base.max_tokens = context;
  auto one = kv::plan_cache_layout(shape, base);
  if (!one.ok())
    return Status(one.status().code(),
                  fmt::format("[engine] model {}: {}", model_name, one.status().message()));
  if (Status st = kv::check_kv_budget(shape, base, one.value()); !st.ok())
    return Status(st.code(), fmt::format("[engine] model {}: the KV budget cannot hold one "
                                         "context: {}",
                                         model_name, st.message()));
  // The largest pool in [context, max_seqs * context] that fits the budget.
  int64_t lo = context, hi = std::min<int64_t>(int64_t{max_seqs} * context, kv::kMaxCacheTokens);
  size_t lo_bytes = one.value().pool_bytes;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    kv::CacheOptions o = base;
    o.max_tokens = mid;
    auto lay = kv::plan_cache_layout(shape, o);
    if (lay.ok() && lay.value().pool_bytes <= base.budget_bytes) {
      lo = mid;
      lo_bytes = lay.value().pool_bytes;
    } else {
      hi = mid - 1;
    }
  }
  KvSizing s;
  s.cache = base;
  s.cache.max_tokens = lo;
  s.total_pages = (lo + base.page_size - 1) / base.page_size;
  s.pool_bytes = lo_bytes;
  return s;
}

size_t kv_bytes_for_tokens(const kv::KvMemoryModel& m, int64_t n) {
  const auto un = static_cast<size_t>(std::max<int64_t>(n, 0));
  const size_t prefix = std::min(un, static_cast<size_t>(m.prefix_tokens));
  const size_t rest_layers = m.bytes_per_token - m.full_bytes_per_token;
  return un * rest_layers + prefix * m.prefix_bytes_per_token +
         (un - prefix) * m.full_bytes_per_token;
}

}  // namespace tkv::runtime
