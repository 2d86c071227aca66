// Changes of the prefix index in the order they happened, recorded for
// `serve --kv-events` (KvCache::record_prefix_events): full pages indexed
// (stored), cached pages evicted (removed), the index emptied (cleared). Keys
// are the chained block keys of prefix_key.h.
#pragma once
#include <cstdint>
#include <vector>

namespace tkv::kv {

struct PrefixEvent {
  enum class Kind : uint8_t { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  // kStored: consecutive blocks of one sequence, in order; kRemoved: evicted keys.
  std::vector<uint64_t> keys;
  uint64_t parent = 0;          // kStored: key of the block before keys[0]; 0 = none (block 0)
  std::vector<int32_t> tokens;  // kStored: [keys.size() * page_size]
};

}  // namespace tkv::kv
