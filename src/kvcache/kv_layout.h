// Cache planning: the single conversion point that decides, for every layer and
// position, which format a token is stored in (bf16 prefix below --kv-quant-start,
// the --kv-quant scheme from there on; sliding-window layers quantized too unless
// --kv-quant-swa bf16), and how many pages each store gets. Pure host arithmetic.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/kv_cache.h"
#include "quant/kv_scheme.h"

namespace tkv::kv {

constexpr int64_t kNoEnd = INT64_MAX / 4;

// One format over one position range of one layer group.
struct StoreSpec {
  int group = 0;                    // index into CacheLayout::groups
  quant::KvScheme scheme;           // bf16/f16 rows (scheme.is_float()) or the --kv-quant scheme
  int64_t begin = 0, end = kNoEnd;  // positions [begin, end)
  int64_t window = 0;               // 0 = full attention, else the group's largest window
  int64_t n_pages = 0;
};

struct LayerGroup {
  std::vector<int> layers;  // model layer ids
  std::vector<int> stores;  // store ids in position order
};

struct LayerSlot {
  int group = 0, slot = 0;  // layer = groups[group].layers[slot]
};

struct CacheLayout {
  std::string name;  // scheme_name(): "bf16", "affine8", "turbo:k8v3", "+bf16<N", "+swa-bf16"
  std::vector<LayerGroup> groups;
  std::vector<StoreSpec> stores;
  std::vector<LayerSlot> layer_slots;  // [n_layers]
  KvMemoryModel memory;
  int64_t capacity_tokens = 0;
  bool swa_bf16_warning = false;
  size_t pool_bytes = 0;  // every pool of every store, as allocated
};

// Validates shape/options (head_dim against the scheme, refusing e.g. turbo on
// head_dim 80 with a message naming both) and plans the stores.
// Errors (not wrap-around) when a size overflows.
Result<CacheLayout> plan_cache_layout(const KvShape& shape, const CacheOptions& opts);

// Refuses a layout whose pools exceed opts.budget_bytes (or the default budget),
// naming the context, the bytes it needs, the budget and the largest context that fits.
Status check_kv_budget(const KvShape& shape, const CacheOptions& opts, const CacheLayout& lay);

}  // namespace tkv::kv
