// bench --concurrency N: N requests with distinct random prompts of ctx tokens
// decode together, as llama-batched-bench measures it (-npl N -npp ctx -ntg n):
//  1. prefill: the N prompts are submitted at once, one token each; prefill
//     tok/s of the batch = N x ctx / the wall time until the last one ends
//     (llama-batched-bench's S_PP). Their full pages stay in the prefix cache.
//  2. decode: the N prompts + 1 fresh token each are submitted at once, -n tokens
//     each; the prompts come from the prefix cache, so the first step computes
//     one token per sequence and every later step is a decode of all N.
//     Decode window: from the end of the step that gave the last sequence its
//     first token to the end of the step that gave the last token. Aggregate
//     tok/s = tokens sampled in steps of the window / the window's wall time
//     (S_TG: N x (n - 1) tokens over n - 1 steps when all start together).
//     TPOT: each sequence's decode_ms / decode_tokens, averaged.
// One engine per (ctx, N): max_seqs N and a pool of N whole contexts.
#include <algorithm>
#include <chrono>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {
namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// When and in which engine step each token of one sequence came out.
struct TokenTimes {
  std::vector<std::pair<int64_t, double>> at;  // (step, ms)
};

struct Point {
  int n_seqs = 0;
  int64_t ctx = 0, n_gen = 0;
};

class BatchBench {
 public:
  BatchBench(turbokv::Engine& eng, const BenchArgs& a, std::string scheme, Point pt, uint32_t seed)
      : eng_(eng), a_(a), scheme_(std::move(scheme)), pt_(pt), rng_(seed) {}

  Result<BatchRow> run() {
    std::vector<BatchRow> reps;
    for (int r = 0; r < a_.reps; ++r) {
      TKV_ASSIGN_OR_RETURN(BatchRow x, once());
      reps.push_back(x);
    }
    std::sort(reps.begin(), reps.end(),
              [](const BatchRow& a, const BatchRow& b) { return a.agg_tok_s < b.agg_tok_s; });
    return reps[reps.size() / 2];
  }

 private:
  Result<BatchRow> once() {
    const int32_t nv = eng_.model_info().n_vocab;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < pt_.n_seqs; ++i) prompts.push_back(random_tokens(rng_, pt_.ctx, nv));
    BatchRow row;
    row.scheme = scheme_;
    row.concurrency = pt_.n_seqs;
    row.ctx = pt_.ctx;
    row.n_gen = pt_.n_gen;
    // 1. The batch's prefill.
    std::vector<turbokv::RequestHandle> hs;
    const double t0 = now_ms();
    for (const auto& p : prompts) {
      TKV_ASSIGN_OR_RETURN(turbokv::RequestHandle h, eng_.submit(fixed_request(p, 1)));
      hs.push_back(h);
    }
    for (auto& h : hs) TKV_RETURN_IF_ERROR(check(h.wait()));
    row.prefill_tok_s = static_cast<double>(pt_.n_seqs * pt_.ctx) * 1000.0 / (now_ms() - t0);
    // 2. Decode, every token timed with its step.
    std::vector<TokenTimes> times(prompts.size());
    hs.clear();
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto p = prompts[i];
      p.push_back(random_tokens(rng_, 1, nv)[0]);
      turbokv::Request r = fixed_request(std::move(p), pt_.n_gen);
      times[i].at.reserve(static_cast<size_t>(pt_.n_gen));
      // On the engine thread, during a step: stats().steps counts the steps before it.
      r.on_token = [this, t = &times[i]](const turbokv::Event& e) {
        if (e.token >= 0) t->at.emplace_back(eng_.stats().steps, now_ms());
      };
      TKV_ASSIGN_OR_RETURN(turbokv::RequestHandle h, eng_.submit(r));
      hs.push_back(h);
    }
    double tpot = 0;
    row.cached_tokens = pt_.ctx;
    for (auto& h : hs) {
      const turbokv::Event e = h.wait();
      TKV_RETURN_IF_ERROR(check(e));
      const turbokv::Timings& t = e.timings;
      tpot += t.decode_tokens > 0 ? t.decode_ms / static_cast<double>(t.decode_tokens) : 0;
      row.cached_tokens = std::min(row.cached_tokens, t.cached_tokens);
    }
    row.tpot_ms = tpot / static_cast<double>(hs.size());
    TKV_RETURN_IF_ERROR(window(times, row));
    // Bytes per decode step: the weights once, each sequence's KV at the mean context.
    const double kv = static_cast<double>(eng_.kv_bytes_for_tokens(pt_.ctx + pt_.n_gen / 2));
    const double steps_s = row.agg_tok_s / pt_.n_seqs;
    row.gbs = steps_s *
              (static_cast<double>(eng_.model_info().weight_bytes_per_token) + pt_.n_seqs * kv) /
              1e9;
    return row;
  }

  // The decode window (see the file comment) from every token's (step, time).
  Status window(const std::vector<TokenTimes>& times, BatchRow& row) const {
    int64_t s0 = 0;  // the step that gave the last sequence its first token
    for (const auto& t : times) s0 = std::max(s0, t.at.front().first);
    double w0 = 0, w1 = 0;
    int64_t n = 0;
    for (const auto& t : times)
      for (const auto& [step, ms] : t.at) {
        if (step == s0) w0 = std::max(w0, ms);
        if (step > s0) ++n;
        w1 = std::max(w1, ms);
      }
    if (n == 0 || w1 <= w0)
      return make_error(StatusCode::kInternal,
                        "[bench] no decode step after the last first token ({} sequences, -n {})",
                        pt_.n_seqs, pt_.n_gen);
    row.agg_tok_s = static_cast<double>(n) * 1000.0 / (w1 - w0);
    return Status();
  }

  Status check(const turbokv::Event& e) const {
    if (e.finish == turbokv::FinishReason::kLength) return Status();
    return make_error(StatusCode::kInternal,
                      "[bench] --concurrency {} ctx {}: a request ended: {}{}{}", pt_.n_seqs,
                      pt_.ctx, turbokv::finish_reason_name(e.finish), e.error.empty() ? "" : ": ",
                      e.error);
  }

  turbokv::Engine& eng_;
  const BenchArgs& a_;
  std::string scheme_;
  Point pt_;
  std::mt19937 rng_;
};

}  // namespace

Status run_batch(const BenchArgs& a, const std::string& scheme, Results& out) {
  uint32_t seed = 1;
  for (int ctx : a.n_prompt)
    for (int g : a.n_gen)
      for (int n : a.concurrency) {
        const Point pt{n, ctx, g};
        // A sequence holds its prompt, the fresh token and n - 1 sampled tokens:
        // whole pages of that per sequence, so the pool admits all N at once.
        const int64_t context = round_up(ctx + g + 1, turbokv::EngineConfig{}.page_size);
        TKV_ASSIGN_OR_RETURN(auto eng, open_engine(a.common, scheme, n, context));
        const turbokv::KvInfo kv = eng->kv_info();
        if (kv.pool_tokens < int64_t{n} * context)
          return make_error(
              StatusCode::kResourceExhausted,
              "[bench] --concurrency {} at ctx {}: the KV pool holds {} tokens ({} B/token, "
              "{:.2f} GiB), {} sequences of {} tokens need {}; raise --kv-budget",
              n, ctx, kv.pool_tokens, kv.bytes_per_token,
              static_cast<double>(kv.allocated_bytes) / (1 << 30), n, context,
              int64_t{n} * context);
        out.model = eng->model_info().name;
        BatchBench b(*eng, a, scheme, pt, seed++);
        TKV_ASSIGN_OR_RETURN(BatchRow row, b.run());
        if (row.cached_tokens < ctx / kv.page_size * kv.page_size)
          std::fprintf(
              stderr,
              "warning: [bench] %s --concurrency %d ctx %d: a decode request reused only "
              "%lld prompt tokens from the prefix cache; its prefill overlapped decoding\n",
              scheme.c_str(), n, ctx, static_cast<long long>(row.cached_tokens));
        out.batch.push_back(row);
        if (!a.json)
          std::fprintf(stderr, "[bench] %s N=%d ctx=%d: %.1f tok/s aggregate\n", scheme.c_str(), n,
                       ctx, row.agg_tok_s);
      }
  return Status();
}

}  // namespace tkv::cli::bench
