// turbokv eval: quality of KV schemes against bf16 KV (docs/eval/README.md).
// --protocol serving-kl | wikitext | needle; --schemes runs a list sequentially,
// writing a table to stdout and the curve.json rows (or needle.json) to --out.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/eval.h"
#include "eval/needle.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct EvalArgs {
  CommonOptions common;
  std::string protocol = "serving-kl";
  std::string schemes =
      "bf16,8,turbo:k8v8,turbo:k8v4,turbo:k8v3,turbo:k8v2,4,turbo:k4v3,turbo:k4v2";
  std::string data = "../shared/data/wikitext-2-raw-test.txt";
  std::string base;
  std::string out;
  std::string label;
  eval::EvalOptions eo;
  std::string lengths = "1024,2048,4096";
  std::string depths = "0.1,0.5,0.9";
  int trials = 2;
  bool no_progress = false;
  int base_topk = -1;  // -1: protocol default
  double base_mass = -1;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) v.push_back(item);
  return v;
}

eval::EngineFactory factory_for(const CommonOptions& common) {
  return [common](const std::string& scheme) -> Result<std::unique_ptr<runtime::Engine>> {
    CommonOptions c = common;
    c.kv_quant = scheme;
    auto e = make_engine(c);
    if (!e) return invalid_argument("[eval] cannot build an engine for scheme {}", scheme);
    return e;
  };
}

int write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return 0;
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) {
    std::fprintf(stderr, "error: [eval] cannot write %s\n", path.c_str());
    return 1;
  }
  return 0;
}

int run_needle_cmd(EvalArgs& a, const std::string& model_path) {
  eval::NeedleOptions no;
  no.schemes = split(a.schemes);
  no.lengths.clear();
  for (const auto& s : split(a.lengths)) no.lengths.push_back(std::stoll(s));
  no.depths.clear();
  for (const auto& s : split(a.depths)) no.depths.push_back(std::stod(s));
  no.trials = a.trials;
  no.model_label = a.label.empty() ? std::filesystem::path(model_path).stem().string() : a.label;
  no.progress = !a.no_progress;
  auto r = eval::run_needle(no, factory_for(a.common));
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return 1;
  }
  const nlohmann::json j = eval::needle_to_json(no, r.value());
  for (const auto& s : j["summary"])
    std::printf("%-12s len %5lld depth %.2f accuracy %.2f (n=%d)\n",
                s["scheme"].get<std::string>().c_str(),
                static_cast<long long>(s["length"].get<int64_t>()), s["depth"].get<double>(),
                s["accuracy"].get<double>(), s["n"].get<int>());
  return write_json(a.out, j);
}

int run_eval_cmd(EvalArgs& a) {
  const std::string model_path =
      a.common.model.empty() ? runtime::default_model_path() : a.common.model;
  if (a.protocol == "needle") return run_needle_cmd(a, model_path);
  auto proto = eval::parse_protocol(a.protocol);
  if (!proto.ok()) {
    std::fprintf(stderr, "error: %s\n", proto.status().message().c_str());
    return 1;
  }
  eval::EvalOptions o = a.eo;
  o.protocol = proto.value();
  o.schemes = split(a.schemes);
  o.data_path = a.data;
  o.model_path = model_path;
  o.model_label = a.label.empty() ? std::filesystem::path(model_path).stem().string() : a.label;
  o.swa_mode = a.common.kv_quant_swa;
  o.key_center = a.common.kv_key_center == "on";
  // serving-kl is small enough to keep whole rows (exact KL); wikitext keeps the top tokens up to
  // 0.9999 mass.
  const bool wiki = o.protocol == eval::Protocol::kWikitext;
  o.trunc.k_max = a.base_topk >= 0 ? a.base_topk : (wiki ? 8192 : 0);
  o.trunc.mass = a.base_mass >= 0 ? a.base_mass : (wiki ? 0.9999 : 1.0);
  o.progress = !a.no_progress;
  if (o.protocol == eval::Protocol::kWikitext)
    a.common.ctx = std::max<int64_t>(a.common.ctx, o.n_ctx);
  o.base_path =
      !a.base.empty()
          ? a.base
          : fmt::format("eval-cache/{}.{}{}.tkvbase",
                        std::filesystem::path(model_path).stem().string(), a.protocol,
                        o.protocol == eval::Protocol::kWikitext ? fmt::format("-{}", o.n_ctx) : "");
  auto r = eval::run_eval(o, factory_for(a.common));
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return 1;
  }
  std::fputs(eval::report_to_table(r.value()).c_str(), stdout);
  return write_json(a.out, eval::report_to_json(r.value()));
}
}  // namespace

RunFn add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Quality of KV schemes vs bf16 KV: KL, perplexity, top-1; passkey retrieval");
  add_common_options(sub, a->common);
  sub->add_option("--protocol", a->protocol,
                  "serving-kl (reference, system.md 6) | wikitext (llama.cpp perplexity) | needle");
  sub->add_option("--schemes", a->schemes, "Comma-separated KV schemes, run in order");
  sub->add_option("-f,--data", a->data, "Text corpus (wikitext-2-raw-test.txt)");
  sub->add_option("--base", a->base,
                  "bf16 base-logits file (default eval-cache/<model>.<protocol>.tkvbase)");
  sub->add_option("-o,--out", a->out, "Write rows as JSON here");
  sub->add_option("--label", a->label, "Model name written to the rows");
  sub->add_option("--n-ctx", a->eo.n_ctx, "wikitext: chunk length")->check(CLI::Range(8, 1 << 20));
  sub->add_option("--chunks", a->eo.n_chunks, "wikitext: number of chunks")
      ->check(CLI::PositiveNumber);
  sub->add_option("--prompts", a->eo.n_prompts, "serving-kl: prompts")->check(CLI::PositiveNumber);
  sub->add_option("--prefix", a->eo.prefix_tokens, "serving-kl: teacher-forced prefix tokens")
      ->check(CLI::PositiveNumber);
  sub->add_option("--steps", a->eo.decode_steps, "serving-kl: scored decode steps")
      ->check(CLI::PositiveNumber);
  sub->add_option("--lengths", a->lengths, "needle: prompt lengths in tokens");
  sub->add_option("--depths", a->depths, "needle: key depths in [0, 1]");
  sub->add_option("--trials", a->trials, "needle: trials per (length, depth)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--base-topk", a->base_topk,
                  "Base file: most tokens kept per position (0 = whole vocabulary)");
  sub->add_option("--base-mass", a->base_mass,
                  "Base file: keep tokens until this probability mass (1 = k_max)");
  sub->add_flag("--no-progress", a->no_progress, "No progress bar");
  return [a] { return run_eval_cmd(*a); };
}

}  // namespace tkv::cli
