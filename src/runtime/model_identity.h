// The identity of a model for KV snapshots (kvcache/kv_store.h): XXH3-64 over
// every tensor (name, type, shape, data) and the GGUF metadata that can change
// the forward pass (all keys but general.* (general.architecture kept) and the
// chat template), so the same
// weights under another path or name match and any other weights do not.
#pragma once
#include <cstdint>

#include "base/status.h"
#include "io/gguf.h"

namespace tkv::runtime {

// Reads all tensor data once (about 1 s per 10 GB); a file truncated under the
// mapping gives an error, not SIGBUS.
Result<uint64_t> model_identity(const io::GgufFile& g);

}  // namespace tkv::runtime
