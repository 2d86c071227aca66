// The paged KV cache behind every --kv-quant scheme (bf16, affine 8/4, turbo):
// layers are grouped (full attention / sliding window), each group has one or two
// stores (a bf16 prefix for --kv-quant-start, then the scheme) with their own
// PageTable; sequences live in all stores in lockstep. Layout: docs/kv-cache.md.
#pragma once
#include <memory>

#include "kvcache/kv_cache.h"

namespace tkv::kv {

// Builds the paged cache for opts (plan_cache_layout validates them first).
Result<std::unique_ptr<KvCache>> create_paged_cache(const KvShape& shape, const CacheOptions& opts);

}  // namespace tkv::kv
