// turbokv bench: prefill (pp<N>) and decode (tg<N>) tok/s per KV scheme and
// context depth, like llama-bench; prints achieved GB/s of weights + KV read
// per decoded token. Table on stdout, or JSON with --json.
#include <cstdio>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/timer.h"
#include "tools/turbokv/commands.h"

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
  std::string kv_budget = "8GiB";
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) if (!x.empty()) out.push_back(x);
  return out;
}

struct Row {
  std::string scheme, test;
  int64_t depth;
  double tok_s, gbs;
};

int run_bench(BenchArgs& a) {
  std::vector<std::string> schemes = split(a.schemes.empty() ? a.common.kv_quant : a.schemes);
  std::vector<Row> rows;
  std::string model_name;
  for (const auto& scheme : schemes) {
    CommonOptions co = a.common;
    co.kv_quant = scheme;
    int64_t need = 0;
    for (int d : a.depth) for (int p : a.n_prompt) for (int g : a.n_gen) need = std::max<int64_t>(need, d + std::max(p, g) + 8);
    co.ctx = std::max<int64_t>(co.ctx, need);
    auto eng = make_engine(co);
    if (!eng) return 1;
    model_name = eng->model().config().name;
    const int nv = eng->model().config().n_vocab;
    std::mt19937 rng(1234);
    auto rand_tokens = [&](int n) {
      std::vector<int32_t> t(static_cast<size_t>(n));
      for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(nv));
      return t;
    };
    auto& kv = eng->cache();
    std::vector<float> logits;
    for (int d : a.depth) {
      auto seq = kv.create_seq();
      if (!seq.ok()) return 1;
      const int s = seq.value();
      const auto ctx_tokens = rand_tokens(std::max(d, 1));
      auto reset = [&] {
        kv.trim_seq(s, 0);
        if (d > 0) (void)eng->prefill(s, ctx_tokens, &logits);
      };
      for (int p : a.n_prompt) {
        if (p <= 0) continue;
        const auto toks = rand_tokens(p);
        double ms = 0;
        std::vector<double> ts;
        for (int r = 0; r <= a.reps; ++r) {
          reset();
          Timer tm;
          Status st = eng->prefill(s, toks, &logits);
          if (!st.ok()) { std::fprintf(stderr, "error: %s\n", st.message().c_str()); return 1; }
          if (r > 0) ts.push_back(tm.elapsed_ms());
        }
        std::sort(ts.begin(), ts.end());
        ms = ts[ts.size() / 2];
        rows.push_back({kv.scheme_name(), "pp" + std::to_string(p), d, p * 1000.0 / ms, 0.0});
      }
      for (int g : a.n_gen) {
        if (g <= 0) continue;
        std::vector<double> ts;
        for (int r = 0; r <= a.reps; ++r) {
          reset();
          Timer tm;
          int32_t t = 1;
          for (int i = 0; i < g; ++i) {
            Status st = eng->decode(s, t, &logits);
            if (!st.ok()) { std::fprintf(stderr, "error: %s\n", st.message().c_str()); return 1; }
            t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
          }
          if (r > 0) ts.push_back(tm.elapsed_ms());
        }
        std::sort(ts.begin(), ts.end());
        const double tok_s = g * 1000.0 / ts[ts.size() / 2];
        const double kv_bytes = static_cast<double>(kv.bytes_per_token()) * (d + g / 2.0);
        const double bytes = static_cast<double>(eng->model().weight_bytes_per_token()) + kv_bytes;
        rows.push_back({kv.scheme_name(), "tg" + std::to_string(g), d, tok_s, tok_s * bytes / 1e9});
      }
      kv.free_seq(s);
    }
  }
  const int threads = a.common.threads;
  if (a.json) {
    nlohmann::json j;
    j["model"] = model_name;
    j["threads"] = threads;
    for (const auto& r : rows)
      j["rows"].push_back({{"engine", "turbokv"}, {"model", model_name}, {"scheme", r.scheme}, {"test", r.test},
                           {"depth", r.depth}, {"tok_s", r.tok_s}, {"gbs", r.gbs}});
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("| model | kv | test | depth | tok/s | GB/s read |\n|---|---|---|---|---|---|\n");
    for (const auto& r : rows)
      std::printf("| %s | %s | %s | %lld | %.2f | %s |\n", model_name.c_str(), r.scheme.c_str(), r.test.c_str(),
                  static_cast<long long>(r.depth), r.tok_s, r.gbs > 0 ? fmt::format("{:.2f}", r.gbs).c_str() : "-");
  }
  return 0;
}
}  // namespace

RunFn add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Prefill/decode throughput per KV scheme");
  add_common_options(sub, a->common);
  sub->add_option("-p,--n-prompt", a->n_prompt, "Prompt lengths (pp tests)")->delimiter(',');
  sub->add_option("-n,--n-gen", a->n_gen, "Generated lengths (tg tests)")->delimiter(',');
  sub->add_option("-d,--depth", a->depth, "Context depth before each test")->delimiter(',');
  sub->add_option("--schemes", a->schemes, "Comma-separated KV schemes (default: --kv-quant)");
  sub->add_option("-r,--reps", a->reps, "Repetitions (median reported)")->check(CLI::PositiveNumber);
  sub->add_flag("--json", a->json, "JSON output");
  sub->add_flag("--kv-report", a->kv_report, "Print KV bytes/token, allocation and max context per scheme, then exit");
  sub->add_option("--kv-budget", a->kv_budget, "KV memory budget for --kv-report (e.g. 8GiB)");
  return [a] { return a->kv_report ? run_kv_report(a->common, a->kv_budget, a->schemes) : run_bench(*a); };
}

}  // namespace tkv::cli
