// Sizing the engine's KV pool from what the user asked for (context per
// sequence, concurrent sequences, a byte budget) and the refusals that belong
// at start (DESIGN "refusals at start"): a scheme the model's head_dim cannot
// use, or a budget that cannot hold one full context, fail here, naming the
// model, the value and the valid ones, never in the middle of a request.
#pragma once
#include <cstdint>
#include <string>

#include "base/status.h"
#include "kvcache/kv_cache.h"

namespace tkv::runtime {

struct KvSizing {
  kv::CacheOptions cache;   // max_tokens = the pool, max_seqs, max_chunk_tokens set
  int64_t total_pages = 0;  // full-attention pages of the pool (the scheduler's ledger)
  size_t pool_bytes = 0;
};

// base: scheme, page_size, quant_start, swa_bf16, budget_bytes (0 = the
// default budget, half of available memory minus model_bytes). The pool holds
// as many tokens as fit the budget, at most max_seqs * context, at least one
// context (else the error).
Result<KvSizing> size_kv_pool(const kv::KvShape& shape, kv::CacheOptions base, int64_t context,
                              int max_seqs, int64_t step_tokens, const std::string& model_name,
                              size_t model_bytes);

// Bytes the first n tokens of one sequence occupy: the first --kv-quant-start
// tokens at bf16 cost in the full-attention layers, the rest at the scheme's.
size_t kv_bytes_for_tokens(const kv::KvMemoryModel& m, int64_t n);

}  // namespace tkv::runtime
