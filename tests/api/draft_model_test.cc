// Speculative decoding with a draft model through the public API, on SmolLM2
// drafting for itself (the one model CI has; the Qwen 0.5B/1.5B pair is
// the benchmark's): greedy output equals the target's own greedy output and,
// the draft being the same model with the same cache scheme, every draft is
// kept; a speculative and a plain request batched together each give their
// solo tokens; a draft with another vocabulary is refused at create and a
// draft request on an engine without one at submit.
#include <gtest/gtest.h>

#include "tests/api/api_test_util.h"
#include "tests/model/tiny_gguf.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

Request draft_greedy(std::vector<int32_t> prompt, int64_t n) {
  Request r = greedy(std::move(prompt), n);
  r.spec.kind = SpecKind::kDraft;
  r.spec.max_draft = 4;
  return r;
}

std::vector<int32_t> tokens_of(Engine& e, const Request& r) {
  auto c = e.generate(r);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c.value().tokens : std::vector<int32_t>{};
}

TEST(DraftModel, SelfDraftGreedyEqualsPlainAndKeepsEveryDraft) {
  TKV_REQUIRE_SMOLLM2();
  const int64_t n_gen = kSanitized ? 10 : 32;
  for (const char* scheme : {"turbo", "bf16"}) {
    EngineConfig c = smollm2_config(512, 2);
    c.kv = KvConfig::parse(scheme).value();
    c.draft_model_path = tkv::testing::smollm2_path();
    auto eng = make_engine(c);
    ASSERT_TRUE(eng);
    const auto prompt = prompt_of(eng->tokenizer(), 40);
    const auto plain = tokens_of(*eng, greedy(prompt, n_gen));
    auto spec = eng->generate(draft_greedy(prompt, n_gen));
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_EQ(spec.value().tokens, plain) << scheme;
    const Timings& t = spec.value().timings;
    EXPECT_GT(t.drafted_tokens, 0) << scheme;
    EXPECT_EQ(t.accepted_tokens, t.drafted_tokens) << scheme << ": the same model drafts";

    // Batched with a plain request of another prompt: both give their solo tokens.
    const auto other = prompt_of(eng->tokenizer(), 30, 3);
    const auto other_solo = tokens_of(*eng, greedy(other, n_gen));
    auto h1 = eng->submit(draft_greedy(prompt, n_gen));
    auto h2 = eng->submit(greedy(other, n_gen));
    ASSERT_TRUE(h1.ok() && h2.ok());
    std::vector<int32_t> got1, got2;
    Event e;
    while (h1.value().next(e))
      if (e.token >= 0) got1.push_back(e.token);
    while (h2.value().next(e))
      if (e.token >= 0) got2.push_back(e.token);
    EXPECT_EQ(got1, plain) << scheme;
    EXPECT_EQ(got2, other_solo) << scheme;
    const EngineStats s = wait_stats(*eng, [](const EngineStats& x) { return x.running == 0; });
    EXPECT_EQ(s.kv_pages_used, 0);
  }
}

TEST(DraftModel, AnotherVocabularyIsRefusedAtCreate) {
  TKV_REQUIRE_SMOLLM2();
  tkv::testing::TinySpec spec;  // 16 tokens
  spec.tokenizer = true;
  const std::string tiny =
      tkv::testing::write_temp("draft_tiny.gguf", tkv::testing::tiny_model(spec));
  EngineConfig c = smollm2_config(256, 1);
  c.draft_model_path = tiny;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("has a vocabulary of 16 tokens, the target 49152"),
            std::string::npos)
      << e.status().message();
}

TEST(DraftModel, DraftRequestWithoutADraftModelIsRefused) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(256, 1));
  ASSERT_TRUE(eng);
  auto h = eng->submit(draft_greedy(prompt_of(eng->tokenizer(), 8), 4));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("needs an engine started with a draft model"),
            std::string::npos)
      << h.status().message();
}

}  // namespace
}  // namespace turbokv
