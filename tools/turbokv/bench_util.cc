// Helpers shared by the bench measurements (bench.h): engines per scheme,
// random prompts, fixed-length greedy requests, stats after a given step.
#include <algorithm>
#include <chrono>
#include <thread>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {

Result<std::unique_ptr<turbokv::Engine>> open_engine(const CommonOptions& o,
                                                     const std::string& scheme, int max_seqs,
                                                     int64_t context, size_t budget_bytes) {
  CommonOptions co = o;
  co.kv_quant = scheme;  // checked at parse time (--kv-quant, --schemes)
  turbokv::EngineConfig c = engine_config(co, max_seqs);
  c.context = context;
  if (o.kv_budget.empty()) c.kv_budget_bytes = budget_bytes;
  return turbokv::Engine::create(c);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int32_t n_vocab) {
  std::uniform_int_distribution<int32_t> d(0, n_vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

turbokv::Request fixed_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  turbokv::Request r;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

Result<Ran> run_request(turbokv::Engine& eng, turbokv::Request r) {
  Ran out;
  // The final event comes during the request's last step, before the engine counts
  // that step: the stats that include it show steps >= the count then + 1.
  int tokens = 0;
  r.on_token = [&eng, &out, &tokens](const turbokv::Event& e) {
    if (!e.is_final() && ++tokens == 2) out.attn_ms_before_decode = eng.stats().attention_ms;
    if (e.is_final()) out.last_step = eng.stats().steps + 1;
  };
  TKV_ASSIGN_OR_RETURN(turbokv::RequestHandle h, eng.submit(r));
  out.end = h.wait();
  if (out.end.finish != turbokv::FinishReason::kLength)
    return make_error(StatusCode::kInternal, "[bench] a request of {} prompt tokens ended: {}{}{}",
                      r.prompt_tokens.size(), turbokv::finish_reason_name(out.end.finish),
                      out.end.error.empty() ? "" : ": ", out.end.error);
  return out;
}

turbokv::EngineStats stats_after(const turbokv::Engine& eng, int64_t step) {
  turbokv::EngineStats s = eng.stats();
  for (int i = 0; i < 5000 && s.steps < step; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    s = eng.stats();
  }
  return s;
}

int64_t round_up(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace tkv::cli::bench
