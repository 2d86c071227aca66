// Subcommand registration for the turbokv binary. Each cmd_*.cc adds its
// subcommand to the CLI11 app and returns the function that runs it.
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/engine.h"

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
};
void add_common_options(CLI::App* app, CommonOptions& o);
// Builds the engine from common options; prints the error and returns null on failure.
std::unique_ptr<runtime::Engine> make_engine(const CommonOptions& o);
void add_sampling_options(CLI::App* app, sampling::SamplerParams& sp);

RunFn add_generate(CLI::App& app);
RunFn add_chat(CLI::App& app);
RunFn add_bench(CLI::App& app);
RunFn add_eval(CLI::App& app);

// bench --kv-report: KV bytes per token, measured allocation and max context in a budget per
// scheme.
int run_kv_report(const CommonOptions& common, const std::string& budget,
                  const std::string& schemes);

// Progress bar on stderr for long prefills.
void progress_bar(int64_t done, int64_t total);

}  // namespace tkv::cli
