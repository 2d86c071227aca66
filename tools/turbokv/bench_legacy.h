// The single-sequence runtime::Engine that `turbokv bench` still drives until
// its rewrite onto the public API lands; nothing else in tools/ uses it. Delete
// this file and bench_legacy.cc with that rewrite.
#pragma once
#include <memory>

#include "runtime/engine.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {

// Cache options (scheme, --kv-quant-start, capacity ...) the engine is built with.
kv::CacheOptions cache_options(const CommonOptions& o);
// Bytes the first n tokens of a sequence occupy (first --kv-quant-start tokens at bf16 cost).
size_t kv_bytes_for_tokens(const kv::KvMemoryModel& m, int64_t n);
// Builds the engine from common options; prints the error and returns null on failure.
std::unique_ptr<runtime::Engine> make_engine(const CommonOptions& o);

}  // namespace tkv::cli
