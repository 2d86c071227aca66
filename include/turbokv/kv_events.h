// KV-cache events of an Engine (EngineConfig::on_kv_events): which full KV
// blocks its prefix cache holds, as they are stored and removed, so a server can
// publish them to a KV-aware router (`turbokv serve --kv-events`). A block is
// page_size tokens; its hash is the engine's chained block key (it names the
// whole prefix up to the block's end), stable while the engine runs.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace turbokv {

struct KvEvent {
  enum class Kind {
    kBlockStored,       // full blocks entered the prefix cache
    kBlockRemoved,      // cached blocks were evicted
    kAllBlocksCleared,  // the prefix cache was emptied
  };
  Kind kind = Kind::kBlockStored;
  // kBlockStored: consecutive blocks of one sequence, in order; kBlockRemoved: any.
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash;  // kBlockStored: the block before the first
  std::vector<int32_t> token_ids;             // kBlockStored: [block_hashes.size() * block_size]
  int block_size = 0;                         // tokens per block (EngineConfig::page_size)
};

// Called on the engine thread once per step that changed the prefix cache, with
// that step's events in order. It must return quickly: queue the events and
// publish them from another thread.
using KvEventsCallback = std::function<void(std::vector<KvEvent>&& events)>;

}  // namespace turbokv
