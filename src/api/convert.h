// Mapping between the public API's plain types (include/turbokv/) and the
// runtime's: config, request, event. One place, so the two never drift.
#pragma once
#include "runtime/engine_loop.h"
#include "runtime/request.h"
#include "turbokv/engine.h"

namespace turbokv::detail {

// The cache scheme of a parsed --kv-quant (bf16 for auto, which the engine picks at load);
// head_dim is the cache's to set.
tkv::quant::KvScheme to_scheme(const KvConfig& c);
tkv::runtime::LoopOptions to_runtime(const EngineConfig& c);
// r's prompt (tokens, already resolved from messages) goes to `prompt`.
tkv::sampling::SamplerParams to_runtime(const SamplingParams& p);
tkv::runtime::SeqRequest to_runtime(const Request& r, std::vector<int32_t> prompt);
FinishReason to_public(tkv::runtime::Finish f);
Timings to_public(const tkv::runtime::Timings& t);
Event to_public(const tkv::runtime::Event& e);
std::vector<KvEvent> to_public(std::vector<tkv::kv::PrefixEvent>&& in, int block_size);

}  // namespace turbokv::detail
