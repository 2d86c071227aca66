// Helpers of the public-API end-to-end tests on SmolLM2-135M: engine configs,
// prompts of an exact token length, greedy requests, waiting for stats.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/model/test_models.h"
#include "turbokv/engine.h"

namespace turbokv::testing {

using tkv::testing::kSanitized;

#define TKV_REQUIRE_SMOLLM2()                            \
  if (!tkv::testing::have(tkv::testing::smollm2_path())) \
  GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models smollm2)"

inline EngineConfig smollm2_config(int64_t context, int max_seqs, int64_t step_tokens = 512) {
  EngineConfig c;
  c.model_path = tkv::testing::smollm2_path();
  c.context = context;
  c.max_seqs = max_seqs;
  c.step_tokens = step_tokens;
  c.threads = 2;
  return c;
}

inline std::unique_ptr<Engine> make_engine(const EngineConfig& c) {
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

// The first n tokens (BOS first) of an English text repeated as needed.
inline std::vector<int32_t> prompt_of(const Tokenizer& tok, size_t n, int variant = 0) {
  std::string text;
  const std::string para =
      "The river ran past the old mill, where children counted the boats and argued about "
      "which one would reach the sea first. Variant " +
      std::to_string(variant) + ". ";
  std::vector<int32_t> ids;
  while (ids.size() < n) {
    text += para;
    ids = tok.encode(text, true, false);
  }
  ids.resize(n);
  return ids;
}

inline Request greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;  // fixed lengths: every run generates exactly max_tokens
  return r;
}

// Stats are published after each engine step: wait until pred holds (2 s at most).
template <typename Pred>
EngineStats wait_stats(const Engine& e, Pred pred) {
  EngineStats s = e.stats();
  for (int i = 0; i < 200 && !pred(s); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = e.stats();
  }
  return s;
}

}  // namespace turbokv::testing
