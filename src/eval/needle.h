// Passkey retrieval (Mohtashami & Jaggi 2023, "Landmark Attention", the test the
// TurboQuant paper's needle results follow): a random 5-digit key hidden at a depth
// of repeated filler text, asked for at the end; greedy decode must reproduce it.
// Prompts depend only on (length, depth, trial, seed), so every scheme sees the same ones.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval.h"

namespace tkv::eval {

struct NeedleOptions {
  std::vector<std::string> schemes;  // --kv-quant spellings
  turbokv::EngineConfig engine;      // every scheme's engine: this with kv set to the scheme
  std::vector<int64_t> lengths = {1024, 2048, 4096};  // prompt tokens
  std::vector<double> depths = {0.1, 0.5, 0.9};       // where the key sits, 0 = start
  int trials = 2;
  uint32_t seed = 1234;
  int max_new_tokens = 10;
  std::string model_label;
  bool progress = true;
};

struct NeedleTrial {
  std::string scheme;
  int64_t length = 0;  // actual prompt tokens
  double depth = 0;
  int trial = 0;
  int passkey = 0;
  std::string answer;
  bool correct = false;
};

// The prompt of one (length, depth, trial): token ids, and the key hidden in it.
std::vector<int32_t> needle_prompt(const turbokv::Tokenizer& tok, int64_t length, double depth,
                                   int passkey);
int needle_passkey(uint32_t seed, int64_t length, double depth, int trial);

// Greedy generation (Engine::generate) of up to max_new_tokens per trial.
Result<std::vector<NeedleTrial>> run_needle(const NeedleOptions& o,
                                            const EngineFactory& factory = {});
// {"model":..,"trials":[..],"summary":[{"scheme","length","depth","accuracy","n"}]}
nlohmann::json needle_to_json(const NeedleOptions& o, const std::vector<NeedleTrial>& trials);

}  // namespace tkv::eval
