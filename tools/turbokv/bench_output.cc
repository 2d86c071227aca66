// turbokv bench output: markdown tables on stdout, or one JSON object with
// --json: {"model", "threads", "rows": [pp/tg, batch, ttft and spec rows], "fit": [...]}.
// Batch rows carry the fields of docs/bench/batching.json (engine, model, scheme,
// concurrency, ctx, agg_tok_s, tpot_ms).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tools/turbokv/bench.h"

namespace tkv::cli::bench {
namespace {

std::string or_dash(double x, const char* f = "{:.2f}") {
  return x > 0 ? fmt::format(fmt::runtime(f), x) : "-";
}

// bf16's sequences for the "vs bf16" column (0 when bf16 was not measured).
int64_t bf16_seqs(const Results& r) {
  for (const auto& f : r.fit)
    if (f.scheme == "bf16") return f.seqs;
  return 0;
}

void print_json(const BenchArgs& a, const Results& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["threads"] = a.common.threads;
  j["rows"] = nlohmann::json::array();
  const auto base = [&](const std::string& scheme) {
    return nlohmann::json{{"engine", "turbokv"}, {"model", r.model}, {"scheme", scheme}};
  };
  for (const auto& x : r.depth) {
    auto o = base(x.scheme);
    o.update({{"test", x.test},
              {"depth", x.depth},
              {"tok_s", x.tok_s},
              {"gbs", x.gbs},
              {"attn_us_per_tok", x.attn_us_per_tok},
              {"kv_bytes_per_token", x.kv_bytes_per_token},
              {"kv_bytes", x.kv_bytes},
              {"attn_gbs", x.attn_gbs},
              {"prefill_tokens", x.prefill_tokens},
              {"cached_tokens", x.cached_tokens},
              {"path", a.common.kv_attn}});
    j["rows"].push_back(o);
  }
  for (const auto& x : r.batch) {
    auto o = base(x.scheme);
    o.update({{"test", "batch"},
              {"concurrency", x.concurrency},
              {"ctx", x.ctx},
              {"n_gen", x.n_gen},
              {"agg_tok_s", x.agg_tok_s},
              {"tpot_ms", x.tpot_ms},
              {"prefill_tok_s", x.prefill_tok_s},
              {"gbs", x.gbs},
              {"cached_tokens", x.cached_tokens}});
    j["rows"].push_back(o);
  }
  for (const auto& x : r.ttft) {
    auto o = base(x.scheme);
    o.update({{"test", "ttft"},
              {"ctx", x.ctx},
              {"cold_ms", x.cold_ms},
              {"hit_ms", x.hit_ms},
              {"speedup", x.hit_ms > 0 ? x.cold_ms / x.hit_ms : 0.0},
              {"cached_tokens", x.cached_tokens}});
    j["rows"].push_back(o);
  }
  // The rows of docs/bench/speculative.json: one per drafter.
  for (const auto& x : r.spec) {
    for (int spec = 0; spec < 2; ++spec) {
      auto o = base(x.scheme);
      o.update({{"test", "spec"},
                {"drafter", spec ? "ngram" : "none"},
                {"prompts", "code-edit"},
                {"n_prompt", x.n_prompt},
                {"n_gen", x.n_gen},
                {"tok_s", spec ? x.spec_tok_s : x.plain_tok_s}});
      if (spec) o.update({{"accept_rate", x.accept_rate}, {"tokens_per_step", x.tokens_per_step}});
      j["rows"].push_back(o);
    }
  }
  if (!r.fit.empty()) j["fit"] = nlohmann::json::array();
  const int64_t b16 = bf16_seqs(r);
  for (const auto& x : r.fit)
    j["fit"].push_back({{"model", r.model},
                        {"scheme", x.scheme},
                        {"ctx", x.ctx},
                        {"kv_budget_bytes", x.budget_bytes},
                        {"bytes_per_seq", x.bytes_per_seq},
                        {"seqs", x.seqs},
                        {"capped", x.capped},
                        {"vs_bf16", b16 > 0 ? static_cast<double>(x.seqs) / b16 : 0.0}});
  std::printf("%s\n", j.dump(1).c_str());
}

void print_tables(const Results& r) {
  const char* m = r.model.c_str();
  if (!r.depth.empty()) {
    std::printf(
        "| model | kv | test | depth | tok/s | GB/s read | attention µs/tok | attention GB/s | KV "
        "B/token | KV bytes at depth |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& x : r.depth)
      std::printf("| %s | %s | %s | %lld | %.2f | %s | %.1f | %s | %zu | %zu |\n", m,
                  x.scheme.c_str(), x.test.c_str(), static_cast<long long>(x.depth), x.tok_s,
                  or_dash(x.gbs).c_str(), x.attn_us_per_tok, or_dash(x.attn_gbs).c_str(),
                  x.kv_bytes_per_token, x.kv_bytes);
  }
  if (!r.batch.empty()) {
    std::printf(
        "| model | kv | seqs | ctx | gen | decode tok/s (all) | TPOT ms | prefill tok/s | GB/s "
        "read |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& x : r.batch)
      std::printf("| %s | %s | %d | %lld | %lld | %.1f | %.1f | %.1f | %.2f |\n", m,
                  x.scheme.c_str(), x.concurrency, static_cast<long long>(x.ctx),
                  static_cast<long long>(x.n_gen), x.agg_tok_s, x.tpot_ms, x.prefill_tok_s, x.gbs);
  }
  if (!r.ttft.empty()) {
    std::printf(
        "| model | kv | prompt | TTFT cold ms | TTFT repeated ms | speedup | tokens reused "
        "|\n|---|---|---|---|---|---|---|\n");
    for (const auto& x : r.ttft)
      std::printf("| %s | %s | %lld | %.1f | %.1f | %s | %lld |\n", m, x.scheme.c_str(),
                  static_cast<long long>(x.ctx), x.cold_ms, x.hit_ms,
                  or_dash(x.hit_ms > 0 ? x.cold_ms / x.hit_ms : 0, "{:.1f}x").c_str(),
                  static_cast<long long>(x.cached_tokens));
  }
  if (!r.spec.empty()) {
    std::printf(
        "| model | kv | prompt | gen | decode tok/s | with ngram | speedup | drafts kept | "
        "tokens/step |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const auto& x : r.spec)
      std::printf("| %s | %s | %lld | %lld | %.1f | %.1f | %s | %.0f%% | %.2f |\n", m,
                  x.scheme.c_str(), static_cast<long long>(x.n_prompt),
                  static_cast<long long>(x.n_gen), x.plain_tok_s, x.spec_tok_s,
                  or_dash(x.plain_tok_s > 0 ? x.spec_tok_s / x.plain_tok_s : 0, "{:.2f}x").c_str(),
                  100 * x.accept_rate, x.tokens_per_step);
  }
  if (!r.fit.empty()) {
    std::printf(
        "| model | kv | ctx | KV budget | KV bytes/sequence | sequences that fit | vs bf16 "
        "|\n|---|---|---|---|---|---|---|\n");
    const int64_t b16 = bf16_seqs(r);
    for (const auto& x : r.fit)
      std::printf("| %s | %s | %lld | %.2f GiB | %zu | %s%lld | %s |\n", m, x.scheme.c_str(),
                  static_cast<long long>(x.ctx), static_cast<double>(x.budget_bytes) / (1 << 30),
                  x.bytes_per_seq, x.capped ? ">= " : "", static_cast<long long>(x.seqs),
                  or_dash(b16 > 0 ? static_cast<double>(x.seqs) / b16 : 0, "{:.2f}x").c_str());
  }
}

}  // namespace

void print_results(const BenchArgs& a, const Results& r) {
  if (a.json)
    print_json(a, r);
  else
    print_tables(r);
}

}  // namespace tkv::cli::bench
