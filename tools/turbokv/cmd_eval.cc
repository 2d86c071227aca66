// turbokv eval: quality of KV schemes against bf16 KV (docs/eval/README.md).
// --protocol serving-kl | wikitext | needle; --schemes runs a list sequentially,
// writing a table to stdout and the curve.json rows (or needle.json) to --out.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
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
  std::string data;  // "": default_corpus()
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

constexpr const char* kProtocols[] = {"serving-kl", "wikitext", "needle"};
constexpr const char* kCorpusFile = "wikitext-2-raw-test.txt";

// The data folder: $TKV_DATA_DIR, else share/turbokv/data beside an installed
// binary (<prefix>/bin/turbokv), else the source tree's data/ compiled in — never
// the current directory.
std::string data_dir() {
  if (const char* env = std::getenv("TKV_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / TKV_INSTALL_DATA_REL;
    if (std::filesystem::exists(installed / kCorpusFile, ec)) return installed.string();
  }
  return TKV_DATA_DIR;
}

// $XDG_CACHE_HOME/turbokv/eval, else ~/.cache/turbokv/eval.
Result<std::string> eval_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')
    return std::string(x) + "/turbokv/eval";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/turbokv/eval";
  return invalid_argument("[eval] neither XDG_CACHE_HOME nor HOME is set; pass --base FILE");
}

// Every scheme must parse before any model is loaded (whether the model's
// head_dim takes it is checked when its engine is built).
Status check_schemes(const std::vector<std::string>& schemes) {
  if (schemes.empty()) return invalid_argument("[eval] --schemes is empty");
  for (const auto& s : schemes)
    if (auto r = turbokv::KvConfig::parse(s); !r.ok())
      return invalid_argument("[eval] --schemes: {}", r.status().message());
  return Status();
}

Status check_protocol(const std::string& p) {
  for (const char* k : kProtocols)
    if (p == k) return Status();
  return invalid_argument("[eval] unknown protocol '{}' (valid: serving-kl, wikitext, needle)", p);
}

template <typename T>
Result<std::vector<T>> parse_list(const std::string& flag, const std::string& text, T lo, T hi) {
  std::vector<T> out;
  for (const auto& item : split(text)) {
    T v{};
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < lo || v > hi)
      return invalid_argument("[eval] {}: '{}' is not a number in [{}, {}]", flag, item, lo, hi);
    out.push_back(v);
  }
  if (out.empty()) return invalid_argument("[eval] {} is empty", flag);
  return out;
}

// Flags the chosen protocol does not read: a warning each, so a typo'd run is noticed.
void warn_ignored(CLI::App& sub, const std::string& protocol) {
  struct Use {
    const char* flag;
    const char* protocols;
  };
  static const Use kUses[] = {{"--n-ctx", "wikitext"},
                              {"--chunks", "wikitext"},
                              {"--prompts", "serving-kl"},
                              {"--prefix", "serving-kl"},
                              {"--steps", "serving-kl"},
                              {"--lengths", "needle"},
                              {"--depths", "needle"},
                              {"--trials", "needle"},
                              {"--data", "serving-kl wikitext"},
                              {"--base", "serving-kl wikitext"},
                              {"--base-topk", "serving-kl wikitext"},
                              {"--base-mass", "serving-kl wikitext"}};
  for (const Use& u : kUses) {
    const CLI::Option* opt = sub.get_option_no_throw(u.flag);
    if (opt && opt->count() > 0 && std::string(u.protocols).find(protocol) == std::string::npos)
      std::fprintf(stderr, "warning: [eval] %s has no effect with --protocol %s (only %s)\n",
                   u.flag, protocol.c_str(), u.protocols);
  }
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
  auto lengths = parse_list<int64_t>("--lengths", a.lengths, 16, int64_t{1} << 24);
  auto depths = parse_list<double>("--depths", a.depths, 0.0, 1.0);
  if (!lengths.ok() || !depths.ok()) {
    const Status& st = lengths.ok() ? depths.status() : lengths.status();
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  no.lengths = lengths.value();
  // Room for the longest prompt and its answer (needle_prompt stays within a
  // filler sentence of the length asked for).
  const int64_t longest = *std::max_element(no.lengths.begin(), no.lengths.end());
  a.common.ctx = std::max<int64_t>(a.common.ctx, longest + 64 + no.max_new_tokens);
  no.engine = engine_config(a.common, 1);
  no.depths = depths.value();
  no.trials = a.trials;
  no.model_label = a.label.empty() ? std::filesystem::path(model_path).stem().string() : a.label;
  no.progress = !a.no_progress;
  auto r = eval::run_needle(no);
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

int run_eval_cmd(EvalArgs& a, CLI::App& sub) {
  Status st = check_protocol(a.protocol);
  if (st.ok()) st = check_schemes(split(a.schemes));
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return 1;
  }
  warn_ignored(sub, a.protocol);
  auto resolved = resolve_model(a.common.model);
  if (!resolved.ok()) {
    std::fprintf(stderr, "error: %s\n", resolved.status().message().c_str());
    return 1;
  }
  a.common.model = resolved.value();
  const std::string model_path = a.common.model;
  if (a.protocol == "needle") return run_needle_cmd(a, model_path);
  auto proto = eval::parse_protocol(a.protocol);
  if (!proto.ok()) {
    std::fprintf(stderr, "error: %s\n", proto.status().message().c_str());
    return 1;
  }
  eval::EvalOptions o = a.eo;
  o.protocol = proto.value();
  o.schemes = split(a.schemes);
  o.data_path = a.data.empty() ? data_dir() + "/" + kCorpusFile : a.data;
  o.model_label = a.label.empty() ? std::filesystem::path(model_path).stem().string() : a.label;
  // serving-kl is small enough to keep whole rows (exact KL); wikitext keeps the top tokens up to
  // 0.9999 mass.
  const bool wiki = o.protocol == eval::Protocol::kWikitext;
  o.trunc.k_max = a.base_topk >= 0 ? a.base_topk : (wiki ? 8192 : 0);
  o.trunc.mass = a.base_mass >= 0 ? a.base_mass : (wiki ? 0.9999 : 1.0);
  o.progress = !a.no_progress;
  if (o.protocol == eval::Protocol::kWikitext)
    a.common.ctx = std::max<int64_t>(a.common.ctx, o.n_ctx);
  o.engine = engine_config(a.common, 1);
  o.base_path = a.base;
  if (o.base_path.empty()) {
    auto dir = eval_cache_dir();
    if (!dir.ok()) {
      std::fprintf(stderr, "error: %s\n", dir.status().message().c_str());
      return 1;
    }
    o.base_path = fmt::format(
        "{}/{}.{}{}.tkvbase", dir.value(), std::filesystem::path(model_path).stem().string(),
        a.protocol, o.protocol == eval::Protocol::kWikitext ? fmt::format("-{}", o.n_ctx) : "");
  }
  auto r = eval::run_eval(o);
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
  sub->add_option("-f,--data", a->data,
                  "Text corpus (default: wikitext-2-raw-test.txt in $TKV_DATA_DIR, the installed "
                  "share/turbokv/data, or the source tree's data/)");
  sub->add_option("--base", a->base,
                  "bf16 base-logits cache (default "
                  "${XDG_CACHE_HOME:-~/.cache}/turbokv/eval/<model>.<protocol>.tkvbase)");
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
  return [a, sub] { return run_eval_cmd(*a, *sub); };
}

}  // namespace tkv::cli
