// Quality evaluation of KV-cache schemes against bf16 KV (issue 6): two protocols
// over one teacher-forced token stream, scored position by position against a
// stored bf16 base (base_logits.h). serving-kl follows the reference (system.md §6):
// prompts of `prefix_tokens` prefilled, then `decode_steps` teacher-forced
// one-token forward steps (the serving decode path), scoring each. wikitext
// follows llama.cpp's perplexity tool: chunks of n_ctx (BOS first if the model
// adds one), scoring the second half. Engines come from the public API
// (turbokv::Engine::score), one per scheme.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "eval/kl.h"
#include "turbokv/engine.h"

namespace tkv::eval {

enum class Protocol { kServingKl, kWikitext };
Result<Protocol> parse_protocol(const std::string& text);  // "serving-kl" | "wikitext"
const char* protocol_name(Protocol p);

struct EvalOptions {
  Protocol protocol = Protocol::kServingKl;
  std::vector<std::string> schemes;  // --kv-quant spellings, run in order; bf16 base made first
  std::string data_path;             // text corpus (wikitext-2-raw-test.txt)
  // Every scheme's engine: this config with kv set to the scheme (model_path is
  // part of the base key; swa_bf16 and key_center are recorded in the rows,
  // key_center in the base key too). run_eval turns the prefix cache off.
  turbokv::EngineConfig engine;
  std::string model_label;  // free-form name written to the rows
  // wikitext
  int n_ctx = 512;
  int n_chunks = 20;
  // serving-kl
  int n_prompts = 8;
  int prefix_tokens = 128;
  int decode_steps = 32;
  std::string
      base_path;  // base-logits file ("" = <model>.<protocol>.tkvbase next to nothing: required)
  TruncationParams trunc;
  bool progress = true;  // bar + ETA on stderr
};

// Builds the engine of one scheme from its config (EvalOptions::engine with kv
// set); empty = turbokv::Engine::create. Tests may wrap it.
using EngineFactory =
    std::function<Result<std::unique_ptr<turbokv::Engine>>(const turbokv::EngineConfig& cfg)>;
// The engine of `scheme` (a --kv-quant spelling) from base, through factory.
Result<std::unique_ptr<turbokv::Engine>> make_engine(const EngineFactory& factory,
                                                     turbokv::EngineConfig base,
                                                     const std::string& scheme);

struct SchemeResult {
  std::string scheme;
  double bits_per_elem =
      16;  // stored K+V bits per element over all layers (from the cache's bytes/token)
  double format_bits =
      16;  // the scheme's own bits/elem (KvInfo), = bits_per_elem without bf16 layers
  double kl = 0, kl_ci95 = 0;
  double ppl = 0, ppl_ci95 = 0;
  double top1 = 0, top1_ci95 = 0;
  double kept_mass = 0;  // mean base mass kept individually in the base file
  int64_t n_scored = 0;
  double seconds = 0;
};

struct EvalReport {
  EvalOptions opts;
  std::string model_path;
  std::string arch;
  int head_dim = 0;
  int64_t n_tokens_corpus = 0;
  std::vector<SchemeResult> rows;
};

// Runs every scheme in order. The base file is reused when its key matches
// (same model file, protocol and parameters) and written otherwise.
Result<EvalReport> run_eval(const EvalOptions& opts, const EngineFactory& factory = {});

// {"rows":[{"engine":"turbokv","model","protocol","scheme","bits_per_elem","kl","ppl","top1",
// ...}]}
nlohmann::json report_to_json(const EvalReport& r);
// Human-readable table.
std::string report_to_table(const EvalReport& r);

// Checks one curve.json document: "rows" array, each row with the string fields
// model, protocol, scheme, engine and finite numbers bits_per_elem, kl, ppl, top1
// (top1 may be null for peers that do not report it). "" when valid, else the first problem.
std::string check_curve_schema(const nlohmann::json& doc);

}  // namespace tkv::eval
