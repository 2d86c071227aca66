// bf16 paged KV cache: K and V stored as bf16 rows per (token, kv head).
#pragma once
#include <memory>

#include "kvcache/kv_cache.h"

namespace tkv::kv {
Result<std::unique_ptr<KvCache>> create_bf16_cache(const KvShape& shape, const CacheOptions& opts);
}  // namespace tkv::kv
