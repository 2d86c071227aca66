// bench --fit: how many concurrent sequences of -c tokens a KV budget holds per
// scheme, as the engine sizes its pool (whole pages, the budget's bisection in
// the runtime) rather than from a formula: an engine of one sequence gives the
// bytes of one context, an engine asking for as many as that allows gives the
// pool; sequences = its pages / the pages of one context.
#include <algorithm>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {

Status run_fit(const BenchArgs& a, const std::string& scheme, size_t budget, Results& out) {
  constexpr int kMaxSeqs = 4096;  // the engine's most sequences at once
  const int64_t ctx = a.common.ctx;
  TKV_ASSIGN_OR_RETURN(auto one, open_engine(a.common, scheme, 1, ctx, budget));
  const int64_t page = one->kv_info().page_size;
  const size_t per_seq = one->kv_bytes_for_tokens(round_up(ctx, page));
  const int ask =
      static_cast<int>(std::clamp<size_t>(budget / std::max<size_t>(per_seq, 1), 1, kMaxSeqs));
  one.reset();
  TKV_ASSIGN_OR_RETURN(auto eng, open_engine(a.common, scheme, ask, ctx, budget));
  out.model = eng->model_info().name;
  FitRow row;
  row.scheme = scheme;
  row.ctx = ctx;
  row.budget_bytes = budget;
  row.bytes_per_seq = per_seq;
  row.seqs = eng->stats().kv_pages_total / (round_up(ctx, page) / page);
  row.capped = row.seqs >= kMaxSeqs;
  out.fit.push_back(row);
  return Status();
}

}  // namespace tkv::cli::bench
