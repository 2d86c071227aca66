// The runtime::Engine of `turbokv bench` (bench_legacy.h), built from the
// common options as before the public API.
#include "tools/turbokv/bench_legacy.h"

#include <algorithm>
#include <cstdio>

#include "base/mem_info.h"
#include "runtime/kv_sizing.h"

namespace tkv::cli {

kv::CacheOptions cache_options(const CommonOptions& o) {
  kv::CacheOptions c;
  c.scheme = o.kv_quant;
  c.quant_start = o.kv_quant_start;
  c.swa_bf16 = parse_swa_mode(o.kv_quant_swa).value();  // validated at parse time
  const turbokv::AttnPath p = parse_attn_path(o.kv_attn).value();
  c.attn = p == turbokv::AttnPath::kReference ? kv::AttnPath::kReference
           : p == turbokv::AttnPath::kVerify  ? kv::AttnPath::kVerify
                                              : kv::AttnPath::kFused;
  c.max_chunk_tokens = std::max<int64_t>(o.ubatch, 1);
  c.max_tokens = o.ctx;
  c.max_seqs = 4;
  return c;
}

size_t kv_bytes_for_tokens(const kv::KvMemoryModel& m, int64_t n) {
  return runtime::kv_bytes_for_tokens(m, n);
}

std::unique_ptr<runtime::Engine> make_engine(const CommonOptions& o) {
  runtime::EngineOptions eo;
  auto path = resolve_model(o.model);
  if (!path.ok()) {
    std::fprintf(stderr, "error: %s\n", path.status().message().c_str());
    return nullptr;
  }
  eo.model_path = path.value();
  eo.n_threads = o.threads;
  eo.ubatch = o.ubatch;
  eo.key_center = o.kv_key_center == "on";
  eo.cache = cache_options(o);
  if (!o.kv_budget.empty()) eo.kv_budget_bytes = parse_byte_size(o.kv_budget).value();
  auto r = runtime::Engine::create(eo);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return nullptr;
  }
  return std::move(r).value();
}

}  // namespace tkv::cli
