// turbokv bench: speed per KV scheme over the public API. By default prefill
// (pp<N>) and decode (tg<N>) tok/s at context depths, like llama-bench; with
// --concurrency, aggregate decode of N sequences at once, like
// llama-batched-bench; --prefix-hit: TTFT of a repeated prompt; --fit: sequences
// of -c tokens in --kv-budget; --spec ngram: decode with and without
// speculation; --kv-report: KV bytes per scheme. The flags and
// their checks live here, the measurements in bench_*.cc.
#include <sstream>

#include "base/mem_info.h"
#include "tools/turbokv/bench.h"

namespace tkv::cli {
namespace {
using bench::BenchArgs;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

// Checks that need several flags, before any model is loaded; false after the error.
bool check_flags(BenchArgs& a, CLI::App* sub) {
  const auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "error: [bench] %s\n", msg.c_str());
    return false;
  };
  const auto any = [](const std::vector<int>& v, auto pred) {
    return std::any_of(v.begin(), v.end(), pred);
  };
  if (a.depth_tests() && !any(a.n_prompt, [](int p) { return p > 0; }) &&
      !any(a.n_gen, [](int g) { return g > 0; }))
    return fail("nothing to measure: every -p and -n is 0 (give -p N and/or -n N with N >= 1)");
  if (!a.concurrency.empty()) {
    if (any(a.n_prompt, [](int p) { return p < 1; }))
      return fail("--concurrency: every prompt length (-p) must be >= 1");
    if (any(a.n_gen, [](int g) { return g < 2; }))
      return fail(
          "--concurrency: every -n must be >= 2 (the tokens after each sequence's first are what "
          "it measures)");
  }
  const int page = turbokv::EngineConfig{}.page_size;
  if (a.prefix_hit && any(a.n_prompt, [page](int p) { return p <= page; }))
    return fail(fmt::format(
        "--prefix-hit: every prompt length (-p) must be > {} (one KV page), or nothing is reused",
        page));
  if (!finish_spec(sub, a.spec_flags, &a.spec)) return false;
  if (a.spec.kind != turbokv::SpecKind::kNone && any(a.n_gen, [](int g) { return g < 2; }))
    return fail("--spec: -n must be >= 2 (the tokens after the first are what it measures)");
  if (!a.depth_tests()) {
    const std::string why = "with --concurrency, --prefix-hit, --fit or --spec";
    warn_no_effect(sub, "--depth", why);
    if (a.concurrency.empty() && a.spec.kind == turbokv::SpecKind::kNone)
      warn_no_effect(sub, "--n-gen", "with --prefix-hit or --fit");
    if (!a.concurrency.empty() || a.prefix_hit) {
      if (!a.fit)
        warn_no_effect(sub, "--ctx", "with --concurrency or --prefix-hit (sized from -p and -n)");
    }
  }
  return check_common(sub, a.common, a.schemes.empty());
}

int run_bench(BenchArgs& a, CLI::App* sub) {
  if (!check_flags(a, sub)) return 1;
  const std::string budget_text = a.common.kv_budget.empty() ? "8GiB" : a.common.kv_budget;
  const size_t fit_budget = parse_byte_size(budget_text).value();  // checked at parse time
  bench::Results res;
  for (const auto& scheme : split(a.schemes.empty() ? a.common.kv_quant : a.schemes)) {
    Status st;
    if (a.depth_tests()) st = bench::run_depth(a, scheme, res);
    if (st.ok() && !a.concurrency.empty()) st = bench::run_batch(a, scheme, res);
    if (st.ok() && a.prefix_hit) st = bench::run_prefix_hit(a, scheme, res);
    if (st.ok() && a.fit) st = bench::run_fit(a, scheme, fit_budget, res);
    if (st.ok() && a.spec.kind != turbokv::SpecKind::kNone) st = bench::run_spec(a, scheme, res);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 1;
    }
  }
  bench::print_results(a, res);
  return 0;
}

// --schemes: every entry parses as a --kv-quant value.
CLI::Validator scheme_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (split(v).empty()) return "--schemes: no scheme given (e.g. bf16,8,turbo)";
        for (const auto& s : split(v))
          if (auto k = turbokv::KvConfig::parse(s); !k.ok()) return k.status().message();
        return std::string();
      },
      "", "SCHEMES");
}

}  // namespace

RunFn add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Prefill/decode throughput per KV scheme");
  add_common_options(sub, a->common);
  sub->add_option("-p,--n-prompt", a->n_prompt,
                  "Prompt lengths (pp tests; with --concurrency / --prefix-hit: each prompt)")
      ->delimiter(',')
      ->check(int_range("--n-prompt", 0, 1 << 24));
  sub->add_option("-n,--n-gen", a->n_gen,
                  "Generated lengths (tg tests; with --concurrency: tokens per sequence)")
      ->delimiter(',')
      ->check(int_range("--n-gen", 0, 1 << 24));
  sub->add_option("-d,--depth", a->depth, "Context depth before each pp/tg test")
      ->delimiter(',')
      ->check(int_range("--depth", 0, 1 << 24));
  sub->add_option("--concurrency", a->concurrency,
                  "Sequences decoding at once, e.g. 1,4,16,64: aggregate decode tok/s and TPOT "
                  "(prompts of -p tokens, -n tokens each)")
      ->delimiter(',')
      ->check(int_range("--concurrency", 1, 4096));
  sub->add_flag("--prefix-hit", a->prefix_hit,
                "Time to first token of a -p token prompt, cold and repeated (prefix cache hit)");
  sub->add_flag("--fit", a->fit,
                "Concurrent sequences of -c tokens that fit in --kv-budget (8GiB if unset), per "
                "scheme");
  add_spec_options(sub, a->spec_flags);
  sub->add_option("--schemes", a->schemes, "Comma-separated KV schemes (default: --kv-quant)")
      ->check(scheme_list());
  sub->add_option("-r,--reps", a->reps, "Repetitions (median reported)")
      ->check(int_range("--reps", 1, 1000000));
  sub->add_flag("--json", a->json, "JSON output");
  sub->add_flag("--kv-report", a->kv_report,
                "Print KV bytes/token, allocation and max context per scheme, then exit");
  // --kv-budget is a common option: it caps the cache and sizes --fit and the report.
  return [a, sub] {
    if (a->kv_report) {
      for (const char* f :
           {"--json", "-p", "-n", "-d", "-r", "--concurrency", "--prefix-hit", "--fit"})
        warn_no_effect(sub, f, "with --kv-report");
      return run_kv_report(a->common, a->common.kv_budget.empty() ? "8GiB" : a->common.kv_budget,
                           a->schemes);
    }
    return run_bench(*a, sub);
  };
}

}  // namespace tkv::cli
