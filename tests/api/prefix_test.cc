// The engine's prefix cache on SmolLM2-135M (EngineConfig::prefix_cache): a
// request sharing a 1024-token prefix with a finished one maps it in and
// prefills only its suffix, with the greedy tokens of a cold run; the stats and
// Timings count the reuse; off, or for score(), nothing is reused.
#include <gtest/gtest.h>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

// The shared 1024 tokens, then a suffix of its own (no BOS) per variant.
std::vector<int32_t> shared_then(const Tokenizer& tok, int variant) {
  std::vector<int32_t> p = prompt_of(tok, 1024);
  const auto s = tok.encode(
      " Then question " + std::to_string(variant) + ": which boat reached the sea first, and why?",
      false, false);
  p.insert(p.end(), s.begin(), s.end());
  return p;
}

TEST(ApiPrefix, SharedPrefixPrefillsOnlyTheSuffixWithColdTokens) {
  TKV_REQUIRE_SMOLLM2();
  for (const char* scheme : {"bf16", "turbo"}) {
    SCOPED_TRACE(scheme);
    EngineConfig c = smollm2_config(1280, 2);
    c.kv = KvConfig::parse(scheme).value();
    auto warm = make_engine(c);
    c.prefix_cache = false;
    auto cold = make_engine(c);
    ASSERT_TRUE(warm && cold);
    const auto p1 = shared_then(warm->tokenizer(), 1), p2 = shared_then(warm->tokenizer(), 2);
    auto first = warm->generate(greedy(p1, 8));
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first.value().timings.cached_tokens, 0);
    auto hit = warm->generate(greedy(p2, 8));
    auto ref = cold->generate(greedy(p2, 8));
    ASSERT_TRUE(hit.ok() && ref.ok());
    EXPECT_EQ(hit.value().timings.cached_tokens, 1024);
    EXPECT_EQ(hit.value().timings.prefill_tokens, static_cast<int64_t>(p2.size()) - 1024);
    EXPECT_EQ(ref.value().timings.cached_tokens, 0);
    EXPECT_EQ(ref.value().timings.prefill_tokens, static_cast<int64_t>(p2.size()));
    EXPECT_EQ(hit.value().tokens, ref.value().tokens);
    const EngineStats s =
        wait_stats(*warm, [](const EngineStats& x) { return x.prefix_hits >= 1; });
    EXPECT_EQ(s.prefix_hits, 1);
    EXPECT_EQ(s.prefix_tokens_reused, 1024);
    EXPECT_EQ(cold->stats().prefix_hits, 0);
  }
}

TEST(ApiPrefix, RepeatedPromptReusesAllButItsLastPageAndScoreReusesNothing) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(512, 2));
  ASSERT_TRUE(eng);
  const auto p = prompt_of(eng->tokenizer(), 300);
  ASSERT_TRUE(eng->generate(greedy(p, 2)).ok());
  auto again = eng->generate(greedy(p, 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().timings.cached_tokens, 256);  // whole 64-token pages below 300
  EXPECT_EQ(again.value().timings.prefill_tokens, 300 - 256);
  // Teacher-forced scoring wants logits at every position: it computes them all.
  int64_t rows = 0;
  ASSERT_TRUE(eng->score(p, [&](int64_t, int64_t n, const float*) { rows += n; }).ok());
  EXPECT_EQ(rows, 300);
  const EngineStats s = wait_stats(*eng, [](const EngineStats& x) { return x.running == 0; });
  EXPECT_EQ(s.prefix_hits, 1);
  EXPECT_EQ(s.prefix_tokens_reused, 256);
}

}  // namespace
}  // namespace turbokv
