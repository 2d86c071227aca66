// bench --prefix-hit: time to first token of a prompt of -p tokens, cold (new
// random tokens) and then repeated verbatim, when the prefix cache maps in all
// its full pages but the last (the engine always computes at least one token).
// Median of --reps pairs after a warm-up pair; a fresh prompt for every pair.
#include <algorithm>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {

Status run_prefix_hit(const BenchArgs& a, const std::string& scheme, Results& out) {
  int64_t need = 1;
  for (int p : a.n_prompt) need = std::max<int64_t>(need, p + 1);
  TKV_ASSIGN_OR_RETURN(auto eng,
                       open_engine(a.common, scheme, 1, std::max<int64_t>(a.common.ctx, need)));
  out.model = eng->model_info().name;
  std::mt19937 rng(4321);
  for (int p : a.n_prompt) {
    std::vector<double> cold, hit;
    int64_t cached = p;
    for (int r = 0; r <= a.reps; ++r) {
      const auto toks = random_tokens(rng, p, eng->model_info().n_vocab);
      TKV_ASSIGN_OR_RETURN(const Ran c, run_request(*eng, fixed_request(toks, 1)));
      TKV_ASSIGN_OR_RETURN(const Ran h, run_request(*eng, fixed_request(toks, 1)));
      if (r == 0) continue;
      cold.push_back(c.end.timings.ttft_ms);
      hit.push_back(h.end.timings.ttft_ms);
      cached = std::min(cached, h.end.timings.cached_tokens);
    }
    TtftRow row;
    row.scheme = scheme;
    row.ctx = p;
    row.cold_ms = median(cold);
    row.hit_ms = median(hit);
    row.cached_tokens = cached;
    out.ttft.push_back(row);
  }
  return Status();
}

}  // namespace tkv::cli::bench
