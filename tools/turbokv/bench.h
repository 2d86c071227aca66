// turbokv bench internals: the parsed flags, the rows each measurement gives,
// and the measurements themselves (one file each), all over the public API
// (include/turbokv/). cmd_bench.cc parses and dispatches; bench_output.cc prints.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tools/turbokv/commands.h"

namespace tkv::cli::bench {

struct BenchArgs {
  CommonOptions common;
  std::vector<int> n_prompt{512};  // pp lengths; with --concurrency / --prefix-hit: prompt lengths
  std::vector<int> n_gen{128};     // tg lengths; with --concurrency: tokens per sequence
  std::vector<int> depth{0};       // context before each pp/tg test
  std::vector<int> concurrency;    // --concurrency: sequences decoding at once
  bool prefix_hit = false;         // --prefix-hit: TTFT cold vs repeated prompt
  bool fit = false;                // --fit: concurrent -c sequences in --kv-budget
  std::string schemes;             // --schemes (default: --kv-quant)
  int reps = 3;
  bool json = false;
  bool kv_report = false;
  SpecFlags spec_flags;      // --spec ngram: decode with and without speculation
  turbokv::SpecParams spec;  // ... as checked by finish_spec
  // Whether the pp/tg tests run: only when no other measurement was asked for.
  bool depth_tests() const {
    return concurrency.empty() && !prefix_hit && !fit && spec.kind == turbokv::SpecKind::kNone;
  }
};

// pp<N> / tg<N> at a context depth (bench_depth.cc).
struct DepthRow {
  std::string scheme, test;
  int64_t depth = 0;
  double tok_s = 0;
  double gbs = 0;              // tg: weights + KV bytes per decoded token x tok/s
  double attn_us_per_tok = 0;  // attention wall time per computed token
  double attn_gbs = 0;         // tg: KV bytes attention reads per token / its time
  size_t kv_bytes_per_token = 0;
  size_t kv_bytes = 0;         // KV bytes one sequence of `depth` tokens holds
  int64_t prefill_tokens = 0;  // tokens computed before the first token
  int64_t cached_tokens = 0;   // depth tokens reused from the prefix cache
};

// --concurrency: N sequences of ctx tokens decoding together (bench_batch.cc).
struct BatchRow {
  std::string scheme;
  int concurrency = 0;
  int64_t ctx = 0, n_gen = 0;
  double agg_tok_s = 0;       // tokens of the decode window / its wall time (S_TG)
  double tpot_ms = 0;         // mean over sequences of decode_ms / decode_tokens
  double prefill_tok_s = 0;   // N x ctx / wall time of the batch's prefill
  double gbs = 0;             // (weights + N x KV at the mean context) x decode steps/s
  int64_t cached_tokens = 0;  // least prefix reuse of a sequence's decode request
};

// --prefix-hit: time to first token of a prompt, cold and repeated (bench_prefix.cc).
struct TtftRow {
  std::string scheme;
  int64_t ctx = 0;
  double cold_ms = 0, hit_ms = 0;
  int64_t cached_tokens = 0;  // tokens the repeated prompt reused
};

// --fit: how many sequences of ctx tokens the KV budget holds (bench_fit.cc).
struct FitRow {
  std::string scheme;
  int64_t ctx = 0;
  size_t budget_bytes = 0;
  size_t bytes_per_seq = 0;  // KV of one ctx-token sequence, whole pages
  int64_t seqs = 0;          // sequences of ctx tokens the engine's pool holds
  bool capped = false;       // seqs is the engine's maximum, not the budget's
};

// --spec: one greedy request's decode without and with speculation (bench_spec.cc).
struct SpecRow {
  std::string scheme;
  int64_t n_prompt = 0, n_gen = 0;
  double plain_tok_s = 0, spec_tok_s = 0;
  double accept_rate = 0;      // draft tokens kept / verified
  double tokens_per_step = 0;  // decode tokens / decode steps with speculation
};

struct Results {
  std::string model;
  std::vector<DepthRow> depth;
  std::vector<BatchRow> batch;
  std::vector<TtftRow> ttft;
  std::vector<FitRow> fit;
  std::vector<SpecRow> spec;
};

Status run_depth(const BenchArgs& a, const std::string& scheme, Results& out);
Status run_batch(const BenchArgs& a, const std::string& scheme, Results& out);
Status run_prefix_hit(const BenchArgs& a, const std::string& scheme, Results& out);
Status run_fit(const BenchArgs& a, const std::string& scheme, size_t budget, Results& out);
Status run_spec(const BenchArgs& a, const std::string& scheme, Results& out);
void print_results(const BenchArgs& a, const Results& r);

// Shared helpers (bench_util.cc).
// An engine for one scheme: context tokens per sequence, max_seqs at once, the
// step budget at least max_seqs; --kv-budget when given, else budget_bytes (0 = default).
Result<std::unique_ptr<turbokv::Engine>> open_engine(const CommonOptions& o,
                                                     const std::string& scheme, int max_seqs,
                                                     int64_t context, size_t budget_bytes = 0);
// n token ids drawn uniformly from the vocabulary.
std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int32_t n_vocab);
// Greedy, past end-of-generation tokens: exactly max_tokens tokens come out.
turbokv::Request fixed_request(std::vector<int32_t> prompt, int64_t max_tokens);
// A finished request: its final event and the engine step it ended in.
struct Ran {
  turbokv::Event end;
  int64_t last_step = 0;
  // Engine attention_ms when the second token came: the steps up to the first token
  // (the prefill) counted, no decode step yet (-1: fewer than two tokens).
  double attn_ms_before_decode = -1;
};
// submit + wait (r.on_token is taken for the step count); an error for a request
// that did not end by its length.
Result<Ran> run_request(turbokv::Engine& eng, turbokv::Request r);
// Stats once they include engine step `step` (they are published after each step).
turbokv::EngineStats stats_after(const turbokv::Engine& eng, int64_t step);
int64_t round_up(int64_t n, int64_t to);
double median(std::vector<double> v);

}  // namespace tkv::cli::bench
