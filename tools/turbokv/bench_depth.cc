// bench pp<N> / tg<N> at depth d (like llama-bench -d): the d context tokens are
// prefilled once per depth by a request of their own; every test request then
// starts with them, the prefix cache maps them in, and only the new tokens are
// computed. pp: prefill tok/s of those tokens; tg: decode tok/s from the
// request's Timings (greedy, past end tokens). Median of --reps after a warm-up.
#include <algorithm>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {
namespace {

struct Rep {
  double tok_s = 0, attn_ms = 0;
  int64_t prefill_tokens = 0, cached_tokens = 0, computed = 0;
};

class DepthBench {
 public:
  DepthBench(turbokv::Engine& eng, const BenchArgs& a, std::string scheme)
      : eng_(eng), a_(a), scheme_(std::move(scheme)), rng_(1234) {}

  Status run(std::vector<DepthRow>& rows) {
    for (int d : a_.depth) {
      ctx_ = random_tokens(rng_, d, eng_.model_info().n_vocab);
      // The context's own prefill: afterwards its full pages are in the prefix cache.
      if (d > 0) TKV_RETURN_IF_ERROR(run_request(eng_, fixed_request(ctx_, 1)).status());
      for (int p : a_.n_prompt)
        if (p > 0) TKV_RETURN_IF_ERROR(test(d, p, /*gen=*/0, rows));
      for (int g : a_.n_gen)
        if (g > 0) TKV_RETURN_IF_ERROR(test(d, /*prompt=*/1, g, rows));
    }
    return Status();
  }

 private:
  // One pp (gen == 0) or tg test: a warm-up and --reps requests of the context +
  // `prompt` fresh tokens (fresh each time, so only the context is a cache hit).
  Status test(int d, int prompt, int gen, std::vector<DepthRow>& rows) {
    std::vector<Rep> reps;
    for (int r = 0; r <= a_.reps; ++r) {
      std::vector<int32_t> toks = ctx_;
      const auto fresh = random_tokens(rng_, prompt, eng_.model_info().n_vocab);
      toks.insert(toks.end(), fresh.begin(), fresh.end());
      const double attn0 = eng_.stats().attention_ms;  // idle: every earlier step counted
      TKV_ASSIGN_OR_RETURN(const Ran ran, run_request(eng_, fixed_request(toks, gen + 1)));
      const turbokv::Timings& t = ran.end.timings;
      Rep x;
      // tg: the decode steps' attention alone (after the step of the first token), so a
      // context the prefix cache could not supply does not count; pp: the prefill's.
      const double attn_end = stats_after(eng_, ran.last_step).attention_ms;
      x.attn_ms = attn_end - (gen > 0 ? ran.attn_ms_before_decode : attn0);
      x.prefill_tokens = t.prefill_tokens;
      x.cached_tokens = t.cached_tokens;
      x.computed = gen > 0 ? t.decode_tokens : t.prefill_tokens + t.decode_tokens;
      x.tok_s = gen > 0 ? t.decode_tok_s()
                        : (t.prefill_ms > 0 ? t.prefill_tokens * 1000.0 / t.prefill_ms : 0);
      if (r > 0) reps.push_back(x);
    }
    std::sort(reps.begin(), reps.end(),
              [](const Rep& a, const Rep& b) { return a.tok_s < b.tok_s; });
    const Rep& m = reps[reps.size() / 2];
    warn_if_recomputed(d, m.cached_tokens);
    DepthRow row;
    row.scheme = scheme_;
    row.test = (gen > 0 ? "tg" : "pp") + std::to_string(gen > 0 ? gen : prompt);
    row.depth = d;
    row.tok_s = m.tok_s;
    row.attn_us_per_tok = m.computed > 0 ? m.attn_ms * 1000.0 / static_cast<double>(m.computed) : 0;
    row.kv_bytes_per_token = eng_.kv_info().bytes_per_token;
    row.kv_bytes = eng_.kv_bytes_for_tokens(d);
    row.prefill_tokens = m.prefill_tokens;
    row.cached_tokens = m.cached_tokens;
    if (gen > 0) {
      // Bytes that must move per decoded token: every weight matrix once plus the
      // KV attention reads (the mean context over the run).
      const double kv = static_cast<double>(eng_.kv_info().bytes_per_token) * (d + gen / 2.0);
      row.gbs =
          m.tok_s * (static_cast<double>(eng_.model_info().weight_bytes_per_token) + kv) / 1e9;
      row.attn_gbs = row.attn_us_per_tok > 0 ? kv / row.attn_us_per_tok / 1e3 : 0;
    }
    rows.push_back(row);
    return Status();
  }

  // The context should come from the prefix cache in whole pages; if it did not
  // (prefix cache off or evicted), the figure includes its prefill: say so.
  void warn_if_recomputed(int d, int64_t cached) const {
    const int64_t want = d / eng_.kv_info().page_size * eng_.kv_info().page_size;
    if (cached < want)
      std::fprintf(stderr,
                   "warning: [bench] %s depth %d: only %lld of %lld context tokens came from the "
                   "prefix cache; the rest were recomputed inside the measurement\n",
                   scheme_.c_str(), d, static_cast<long long>(cached),
                   static_cast<long long>(want));
  }

  turbokv::Engine& eng_;
  const BenchArgs& a_;
  std::string scheme_;
  std::mt19937 rng_;
  std::vector<int32_t> ctx_;
};

}  // namespace

Status run_depth(const BenchArgs& a, const std::string& scheme, Results& out) {
  // One sequence at a time; its context holds the depth plus the longest test.
  int64_t need = 1;
  for (int d : a.depth) {
    for (int p : a.n_prompt) need = std::max<int64_t>(need, d + p + 1);
    for (int g : a.n_gen) need = std::max<int64_t>(need, d + g + 2);
  }
  TKV_ASSIGN_OR_RETURN(auto eng,
                       open_engine(a.common, scheme, 1, std::max<int64_t>(a.common.ctx, need)));
  out.model = eng->model_info().name;
  DepthBench b(*eng, a, scheme);
  return b.run(out.depth);
}

}  // namespace tkv::cli::bench
