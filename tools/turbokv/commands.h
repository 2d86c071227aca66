// Subcommand registration for the turbokv binary. Each cmd_*.cc adds its
// subcommand to the CLI11 app and returns the function that runs it. Engines
// come from the public API (include/turbokv/) only.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "turbokv/engine.h"

namespace tkv::cli {

using RunFn = std::function<int()>;

// Options shared by every model command (-m, -t, --kv-quant, -c ...).
struct CommonOptions {
  std::string model;
  int threads = 0;
  std::string kv_quant = "bf16";
  int64_t kv_quant_start = 0;          // --kv-quant-start
  std::string kv_quant_swa = "quant";  // --kv-quant-swa quant | bf16
  std::string kv_attn = "fused";       // --kv-attn fused | reference
  std::string kv_key_center = "on";    // --kv-key-center on | off
  std::string kv_budget;               // --kv-budget SIZE; empty = default (memory-based)
  int64_t ctx = 4096;
  int ubatch = 512;
  std::string prompt_cache;       // --prompt-cache DIR (generate, chat, serve); empty = off
  std::string prompt_cache_size;  // --prompt-cache-size SIZE; empty = the engine's default
  std::string draft_model;        // --draft-model (set by finish_spec; resolved path)
  std::string device = "cpu";     // --device cpu | cuda
};
void add_common_options(CLI::App* app, CommonOptions& o);
// --prompt-cache DIR and --prompt-cache-size SIZE (generate, chat, serve).
void add_prompt_cache_options(CLI::App* app, CommonOptions& o);
// Flag checks that need more than one flag, run after parsing and before any model
// loading: warnings for flags without effect, -m resolved to a path. False on error.
// one_scheme: --kv-quant names the cache (false for bench --schemes).
bool check_common(CLI::App* sub, CommonOptions& o, bool one_scheme = true);
// --kv-quant-swa quant | bf16 (true: sliding-window layers keep bf16) and
// --kv-attn fused | reference | verify; the error lists the valid values.
Result<bool> parse_swa_mode(const std::string& text);
Result<turbokv::AttnPath> parse_attn_path(const std::string& text);
// The public-API engine from common options (o.model already resolved by check_common).
turbokv::EngineConfig engine_config(const CommonOptions& o, int max_seqs);
// Resolves -m, builds the engine; prints the error and returns null on failure.
// on_kv_events: EngineConfig::on_kv_events (serve --kv-events).
std::unique_ptr<turbokv::Engine> make_api_engine(const CommonOptions& o, int max_seqs = 1,
                                                 turbokv::KvEventsCallback on_kv_events = {});
void add_sampling_options(CLI::App* app, turbokv::SamplingParams& sp);
// After parsing: validates the sampling ranges (printing the error), warns about
// flags greedy decoding ignores, and draws + prints a random seed unless --seed.
bool finish_sampling(CLI::App* sub, turbokv::SamplingParams& sp);

// --spec none | ngram, --spec-max N, --draft-model PATH (refused: not yet).
struct SpecFlags {
  std::string kind = "none";
  int max_draft = 8;
  std::string draft_model;
};
void add_spec_options(CLI::App* app, SpecFlags& f);
// After parsing: the request's SpecParams, or false after printing the error.
// common: where --draft-model goes (the engine loads it); null where no draft
// model is supported (bench).
bool finish_spec(CLI::App* sub, const SpecFlags& f, turbokv::SpecParams* out,
                 CommonOptions* common = nullptr);

// Prints "warning: FLAG has no effect WHY" when FLAG was given on sub.
void warn_no_effect(CLI::App* sub, const std::string& flag, const std::string& why);

// Integer flag check whose error names the flag, the value and a readable range.
inline constexpr int64_t kNoMax = INT64_MAX;
CLI::Validator int_range(const std::string& name, int64_t lo, int64_t hi);

// Model cache: $TKV_MODEL_DIR, else $XDG_CACHE_HOME/turbokv/models, else
// ~/.cache/turbokv/models (where scripts/fetch-models puts files).
std::string model_cache_dir();
// Default model path: $TKV_MODEL or SmolLM2-135M-Instruct.Q4_1.gguf in the model cache.
std::string default_model_path();
// -m NAME: "" -> $TKV_MODEL or smollm2; a known short name -> its file in the model
// cache (error with the fetch command if absent); anything else is a path.
Result<std::string> resolve_model(const std::string& name);
RunFn add_models(CLI::App& app);

RunFn add_generate(CLI::App& app);
RunFn add_chat(CLI::App& app);
RunFn add_bench(CLI::App& app);
RunFn add_eval(CLI::App& app);
RunFn add_serve(CLI::App& app);
RunFn add_kv(CLI::App& app);           // kv inspect FILE
RunFn add_synth_model(CLI::App& app);  // synth-model -o FILE (random weights, speed only)

// bench --kv-report: KV bytes per token, measured allocation and max context in a budget per
// scheme.
int run_kv_report(const CommonOptions& common, const std::string& budget,
                  const std::string& schemes);

// "[turbokv] kv cache SCHEME: N tokens, B bytes used (...)" on stderr for n
// tokens of one sequence (+ the --kv-attn verify line).
void print_kv_summary(const turbokv::Engine& eng, const CommonOptions& o, int64_t n);

// --chat / chat: false (after printing why) when the model has no chat template.
bool check_chat_template(const turbokv::Engine& eng, const std::string& model);

// Progress bar on stderr for long prefills.
void progress_bar(int64_t done, int64_t total);

}  // namespace tkv::cli
