// create_cache: the single place that maps a --kv-quant scheme string to a
// cache implementation.
#include "kvcache/kv_cache.h"

#include "kvcache/bf16_cache.h"

namespace tkv::kv {

Result<std::unique_ptr<KvCache>> create_cache(const KvShape& shape, const CacheOptions& opts) {
  if (opts.scheme == "bf16") return create_bf16_cache(shape, opts);
  return invalid_argument("[kvcache] unsupported --kv-quant '{}' (valid: bf16)", opts.scheme);
}

}  // namespace tkv::kv
