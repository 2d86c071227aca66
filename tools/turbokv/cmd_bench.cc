// turbokv bench: prefill (pp<N>) and decode (tg<N>) tok/s per KV scheme and
// context depth, like llama-bench; prints achieved GB/s of weights + KV read
// per decoded token. Table on stdout, or JSON with --json.
#include <cstdio>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "tools/turbokv/bench_legacy.h"

namespace tkv::cli {
namespace {
struct BenchArgs {
  CommonOptions common;
  std::vector<int> n_prompt{512};
  std::vector<int> n_gen{128};
  std::vector<int> depth{0};
  std::string schemes = "";
  int reps = 3;
  bool json = false;
  bool kv_report = false;       // --kv-report (kv_report.cc)
  std::string fill = "random";  // how depth context is made: random K/V rows | model prefill
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

struct Row {
  std::string scheme, test;
  int64_t depth;
  double tok_s, gbs, attn_us_per_tok;
  size_t kv_bytes_per_token, kv_bytes;  // scheme's bytes/token; bytes held at this depth
  double attn_gbs = 0;  // decode: KV bytes attention read per token / its time per token
};

// One engine (one scheme): runs every (depth, pp, tg) test and appends rows.
class SchemeBench {
 public:
  SchemeBench(runtime::Engine& eng, const BenchArgs& a) : eng_(eng), a_(a), rng_(1234) {}

  Status run(std::vector<Row>& rows) {
    auto& kv = eng_.cache();
    for (int d : a_.depth) {
      TKV_ASSIGN_OR_RETURN(int s, kv.create_seq());
      ctx_tokens_ = rand_tokens(std::max(d, 1));
      for (int p : a_.n_prompt)
        if (p > 0) TKV_RETURN_IF_ERROR(prefill_test(s, d, p, rows));
      for (int g : a_.n_gen)
        if (g > 0) TKV_RETURN_IF_ERROR(decode_test(s, d, g, rows));
      kv.free_seq(s);
    }
    return Status();
  }

 private:
  std::vector<int32_t> rand_tokens(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    const auto nv = static_cast<uint32_t>(eng_.model().config().n_vocab);
    for (auto& x : t) x = static_cast<int32_t>(rng_() % nv);
    return t;
  }
  // Empties the sequence and refills it to `depth` tokens (untimed): by running
  // the model over random tokens (--fill model), or by writing random N(0,1) K/V
  // rows straight into every layer (--fill random, the default: attention cost
  // does not depend on the values, and a 16k context fills in seconds).
  Status reset(int s, int depth) {
    auto& kv = eng_.cache();
    kv.trim_seq(s, 0);
    eng_.reset_attention_ms();
    if (depth <= 0) return Status();
    if (a_.fill == "model") return eng_.prefill(s, ctx_tokens_, &logits_);
    const auto& sh = kv.shape();
    const int64_t chunk = 256, row = int64_t{sh.n_kv_heads} * sh.head_dim;
    if (fill_k_.empty()) {
      std::normal_distribution<float> nd(0.f, 1.f);
      fill_k_.resize(static_cast<size_t>(chunk * row));
      fill_v_.resize(fill_k_.size());
      for (auto& x : fill_k_) x = nd(rng_);
      for (auto& x : fill_v_) x = nd(rng_);
    }
    for (int64_t p0 = 0; p0 < depth; p0 += chunk) {
      const int64_t n = std::min<int64_t>(chunk, depth - p0);
      TKV_RETURN_IF_ERROR(kv.reserve(s, n));
      for (int l = 0; l < sh.n_layers; ++l) kv.write(l, s, p0, n, fill_k_.data(), fill_v_.data());
      kv.commit(s, n);
    }
    return Status();
  }
  // Median over reps after one warm-up; returns {wall ms, attention ms} of the median run.
  template <typename F>
  Result<std::pair<double, double>> timed(int s, int depth, F&& body) {
    std::vector<std::pair<double, double>> ts;
    for (int r = 0; r <= a_.reps; ++r) {
      TKV_RETURN_IF_ERROR(reset(s, depth));
      Timer tm;
      TKV_RETURN_IF_ERROR(body());
      if (r > 0) ts.emplace_back(tm.elapsed_ms(), eng_.attention_ms());
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  }
  Status prefill_test(int s, int depth, int p, std::vector<Row>& rows) {
    const auto toks = rand_tokens(p);
    TKV_ASSIGN_OR_RETURN(auto t, timed(s, depth, [&] { return eng_.prefill(s, toks, &logits_); }));
    rows.push_back({eng_.cache().scheme_name(), "pp" + std::to_string(p), depth,
                    p * 1000.0 / t.first, 0.0, t.second * 1000.0 / p, kv_bpt(), kv_at(depth)});
    return Status();
  }
  Status decode_test(int s, int depth, int g, std::vector<Row>& rows) {
    TKV_ASSIGN_OR_RETURN(
        auto t, timed(s, depth, [&]() -> Status {
          int32_t tok = 1;
          for (int i = 0; i < g; ++i) {
            TKV_RETURN_IF_ERROR(eng_.decode(s, tok, &logits_));
            tok = static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) -
                                       logits_.begin());
          }
          return Status();
        }));
    const double tok_s = g * 1000.0 / t.first;
    // Bytes that must move per decoded token: every weight matrix once plus the
    // KV read by attention (the mean context over the run).
    const double kv_bytes = static_cast<double>(eng_.cache().bytes_per_token()) * (depth + g / 2.0);
    const double bytes = static_cast<double>(eng_.model().weight_bytes_per_token()) + kv_bytes;
    const double attn_us = t.second * 1000.0 / g;
    rows.push_back({eng_.cache().scheme_name(), "tg" + std::to_string(g), depth, tok_s,
                    tok_s * bytes / 1e9, attn_us, kv_bpt(), kv_at(depth),
                    attn_us > 0 ? kv_bytes / attn_us / 1e3 : 0.0});
    return Status();
  }

  size_t kv_bpt() const { return eng_.cache().bytes_per_token(); }
  // KV bytes a sequence of `depth` tokens holds (first --kv-quant-start tokens at bf16 cost).
  size_t kv_at(int64_t depth) const {
    CommonOptions co = a_.common;
    co.kv_quant = scheme_;
    auto m = kv::kv_memory_model(eng_.cache().shape(), cache_options(co));
    return m.ok() ? kv_bytes_for_tokens(m.value(), depth) : kv_bpt() * static_cast<size_t>(depth);
  }

 public:
  std::string scheme_;  // the --kv-quant / --schemes value this engine was built with

 private:
  runtime::Engine& eng_;
  const BenchArgs& a_;
  std::mt19937 rng_;
  std::vector<int32_t> ctx_tokens_;
  std::vector<float> logits_;
  std::vector<float> fill_k_, fill_v_;
};

void print_rows(const BenchArgs& a, const std::string& model_name, const std::vector<Row>& rows) {
  if (a.json) {
    nlohmann::json j;
    j["model"] = model_name;
    j["threads"] = a.common.threads;
    for (const auto& r : rows)
      j["rows"].push_back({{"engine", "turbokv"},
                           {"model", model_name},
                           {"scheme", r.scheme},
                           {"test", r.test},
                           {"depth", r.depth},
                           {"tok_s", r.tok_s},
                           {"gbs", r.gbs},
                           {"attn_us_per_tok", r.attn_us_per_tok},
                           {"kv_bytes_per_token", r.kv_bytes_per_token},
                           {"kv_bytes", r.kv_bytes},
                           {"attn_gbs", r.attn_gbs},
                           {"path", a.common.kv_attn}});
    std::printf("%s\n", j.dump(1).c_str());
    return;
  }
  std::printf(
      "| model | kv | test | depth | tok/s | GB/s read | attention µs/tok | attention GB/s | KV "
      "B/token | KV bytes at depth |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows)
    std::printf("| %s | %s | %s | %lld | %.2f | %s | %.1f | %s | %zu | %zu |\n", model_name.c_str(),
                r.scheme.c_str(), r.test.c_str(), static_cast<long long>(r.depth), r.tok_s,
                r.gbs > 0 ? fmt::format("{:.2f}", r.gbs).c_str() : "-", r.attn_us_per_tok,
                r.attn_gbs > 0 ? fmt::format("{:.2f}", r.attn_gbs).c_str() : "-",
                r.kv_bytes_per_token, r.kv_bytes);
}

int run_bench(BenchArgs& a, CLI::App* sub) {
  const bool any = std::any_of(a.n_prompt.begin(), a.n_prompt.end(), [](int p) { return p > 0; }) ||
                   std::any_of(a.n_gen.begin(), a.n_gen.end(), [](int g) { return g > 0; });
  if (!any) {
    std::fprintf(stderr,
                 "error: [bench] nothing to measure: every -p and -n is 0 (give -p N and/or -n N "
                 "with N >= 1)\n");
    return 1;
  }
  if (std::all_of(a.depth.begin(), a.depth.end(), [](int d) { return d == 0; }))
    warn_no_effect(sub, "--fill", "when every depth (-d) is 0");
  if (!check_common(sub, a.common, a.schemes.empty())) return 1;
  std::vector<Row> rows;
  std::string model_name;
  for (const auto& scheme : split(a.schemes.empty() ? a.common.kv_quant : a.schemes)) {
    CommonOptions co = a.common;
    co.kv_quant = scheme;
    int64_t need = 0;
    for (int d : a.depth)
      for (int p : a.n_prompt)
        for (int g : a.n_gen) need = std::max<int64_t>(need, d + std::max(p, g) + 8);
    co.ctx = std::max<int64_t>(co.ctx, need);
    auto eng = make_engine(co);
    if (!eng) return 1;
    model_name = eng->model().config().name;
    SchemeBench b(*eng, a);
    b.scheme_ = scheme;
    Status st = b.run(rows);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 1;
    }
  }
  print_rows(a, model_name, rows);
  return 0;
}
}  // namespace

RunFn add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Prefill/decode throughput per KV scheme");
  add_common_options(sub, a->common);
  sub->add_option("-p,--n-prompt", a->n_prompt, "Prompt lengths (pp tests)")
      ->delimiter(',')
      ->check(int_range("--n-prompt", 0, 1 << 24));
  sub->add_option("-n,--n-gen", a->n_gen, "Generated lengths (tg tests)")
      ->delimiter(',')
      ->check(int_range("--n-gen", 0, 1 << 24));
  sub->add_option("-d,--depth", a->depth, "Context depth before each test")
      ->delimiter(',')
      ->check(int_range("--depth", 0, 1 << 24));
  sub->add_option("--schemes", a->schemes, "Comma-separated KV schemes (default: --kv-quant)");
  sub->add_option("-r,--reps", a->reps, "Repetitions (median reported)")
      ->check(int_range("--reps", 1, 1000000));
  sub->add_flag("--json", a->json, "JSON output");
  sub->add_option("--fill", a->fill,
                  "Depth context: random K/V rows written to the cache, or a model prefill")
      ->check(CLI::IsMember({"random", "model"}));
  sub->add_flag("--kv-report", a->kv_report,
                "Print KV bytes/token, allocation and max context per scheme, then exit");
  // --kv-budget is a common option: it caps the cache and sizes the report (8GiB if unset).
  return [a, sub] {
    if (a->kv_report) {
      for (const char* f : {"--json", "--fill", "-p", "-n", "-d", "-r"})
        warn_no_effect(sub, f, "with --kv-report");
      return run_kv_report(a->common, a->common.kv_budget.empty() ? "8GiB" : a->common.kv_budget,
                           a->schemes);
    }
    return run_bench(*a, sub);
  };
}

}  // namespace tkv::cli
