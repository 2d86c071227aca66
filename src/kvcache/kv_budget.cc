// The KV memory budget: the pools are mapped lazily (lazy_pool.h), so without
// this check a large -c would succeed at creation and fail or swap later. The
// refusal names the context, the bytes, the budget and the largest context that fits.
#include "base/mem_info.h"
#include "kvcache/kv_layout.h"

namespace tkv::kv {

size_t default_kv_budget(size_t reserved_bytes) {
  constexpr size_t kFloor = size_t{64} << 20;
  const size_t avail = mem_available_bytes();
  if (avail == 0) return SIZE_MAX;  // unknown: let the allocation decide
  const size_t half = avail / 2;
  return half > reserved_bytes + kFloor ? half - reserved_bytes : kFloor;
}

namespace {
// Pool bytes for a context of n tokens, or SIZE_MAX when the plan fails.
size_t pool_bytes_for(const KvShape& shape, CacheOptions o, int64_t n) {
  o.max_tokens = n;
  auto lay = plan_cache_layout(shape, o);
  return lay.ok() ? lay.value().pool_bytes : SIZE_MAX;
}
}  // namespace

Status check_kv_budget(const KvShape& shape, const CacheOptions& opts, const CacheLayout& lay) {
  const bool is_default = opts.budget_bytes == 0;
  const size_t budget = is_default ? default_kv_budget(0) : opts.budget_bytes;
  if (lay.pool_bytes <= budget) return Status();
  // Pool bytes grow with the context: bisect for the largest one that fits.
  int64_t lo = 0, hi = opts.max_tokens;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (pool_bytes_for(shape, opts, mid) <= budget ? lo : hi) = mid;
  }
  return make_error(
      StatusCode::kResourceExhausted,
      "[kvcache] a context of {} tokens needs {} ({} bytes) of {} KV cache, over the {}KV budget "
      "of {} ({} bytes); the largest context that fits is {} tokens (lower -c or raise "
      "--kv-budget)",
      opts.max_tokens, format_bytes(lay.pool_bytes), lay.pool_bytes, lay.name,
      is_default ? "default (half of available memory) " : "", format_bytes(budget), budget, lo);
}

}  // namespace tkv::kv
