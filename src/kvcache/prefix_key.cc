// Hash chain of prefix sharing (see prefix_key.h) and the namespace helper of
// kv_cache.h, both XXH3-64.
#include "kvcache/prefix_key.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <fmt/format.h>

#include "kvcache/kv_cache.h"

namespace tkv::kv {

uint64_t prefix_block_key(uint64_t ns, uint64_t parent, const int32_t* tokens, int page_size) {
  XXH3_state_t st;
  // A stack state must start with seed 0 (xxhash.h): reset_withSeed skips deriving
  // the secret when leftover bytes already hold this seed.
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset_withSeed(&st, ns);
  XXH3_64bits_update(&st, &parent, sizeof(parent));
  XXH3_64bits_update(&st, tokens, sizeof(int32_t) * static_cast<size_t>(page_size));
  return XXH3_64bits_digest(&st);
}

void prefix_block_keys(uint64_t ns, const int32_t* tokens, int64_t n_blocks, int page_size,
                       uint64_t* keys) {
  uint64_t parent = 0;
  for (int64_t i = 0; i < n_blocks; ++i)
    keys[i] = parent = prefix_block_key(ns, parent, tokens + i * page_size, page_size);
}

uint64_t make_prefix_namespace(const std::string& model_identity, const CacheOptions& opts,
                               bool key_center) {
  const std::string id =
      fmt::format("{}\n{}\nquant_start={}\nswa_bf16={}\nkey_center={}", model_identity,
                  quant::kv_scheme_name(opts.scheme), opts.quant_start, opts.swa_bf16, key_center);
  const uint64_t h = XXH3_64bits(id.data(), id.size());
  return h != 0 ? h : 1;
}

}  // namespace tkv::kv
