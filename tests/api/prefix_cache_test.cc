// The prefix cache through the public API on SmolLM2-135M: a request whose
// prompt starts with a 1k-token prefix another request already computed reuses
// those KV pages (256 tokens under the sanitizers), prefills only its suffix, and gives the same
// greedy tokens as a cold engine (whole pages are shared, so the reuse stops at a page boundary and
// never covers the prompt's last token).
#include <gtest/gtest.h>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Completion run(Engine& e, const std::vector<int32_t>& prompt) {
  auto c = e.generate(greedy(prompt, kSanitized ? 6 : 16));
  EXPECT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().finish, FinishReason::kLength) << c.value().error;
  return c.ok() ? c.value() : Completion{};
}

class PrefixCache : public ::testing::TestWithParam<const char*> {};

TEST_P(PrefixCache, SharedPrefixPrefillsOnlyTheSuffixWithTheSameTokens) {
  TKV_REQUIRE_SMOLLM2();
  EngineConfig cfg = smollm2_config(2048, 2);
  cfg.kv = KvConfig::parse(GetParam()).value();
  cfg.prefix_cache = false;
  auto cold = make_engine(cfg);
  ASSERT_TRUE(cold);
  const auto& tok = cold->tokenizer();
  const int64_t n_prefix = kSanitized ? 256 : 1024;  // whole 64-token pages
  const auto prefix = prompt_of(tok, n_prefix, 1);
  // Suffixes: other text, without a BOS.
  auto s1 = tok.encode(" Then the bell rang twice and everyone turned to the door.", false);
  auto s2 = tok.encode(" Nobody remembered who had built the mill, or when.", false);
  const auto p1 = concat(prefix, s1), p2 = concat(prefix, s2);
  const Completion want = run(*cold, p1);

  cfg.prefix_cache = true;
  auto warm = make_engine(cfg);
  ASSERT_TRUE(warm);
  const Completion first = run(*warm, p2);  // computes and publishes the prefix
  EXPECT_EQ(first.timings.cached_tokens, 0);
  const Completion hit = run(*warm, p1);
  EXPECT_EQ(hit.timings.cached_tokens, n_prefix);
  EXPECT_EQ(hit.timings.prefill_tokens, static_cast<int64_t>(s1.size()));
  EXPECT_EQ(hit.tokens, want.tokens);
  // The same prompt again: every full page but the one holding the last token.
  const Completion again = run(*warm, p1);
  EXPECT_EQ(again.timings.cached_tokens, (static_cast<int64_t>(p1.size()) - 1) / 64 * 64);
  EXPECT_EQ(again.tokens, want.tokens);
  const EngineStats st = warm->stats();
  EXPECT_EQ(st.prefix_hits, 2);
  EXPECT_EQ(st.prefix_tokens_reused, hit.timings.cached_tokens + again.timings.cached_tokens);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PrefixCache, ::testing::Values("bf16", "turbo"));

TEST(PrefixCacheOff, NothingIsReusedWhenDisabled) {
  TKV_REQUIRE_SMOLLM2();
  EngineConfig cfg = smollm2_config(1024, 1);
  cfg.prefix_cache = false;
  auto e = make_engine(cfg);
  ASSERT_TRUE(e);
  const auto p = prompt_of(e->tokenizer(), 300, 2);
  run(*e, p);
  EXPECT_EQ(run(*e, p).timings.cached_tokens, 0);
  EXPECT_EQ(e->stats().prefix_hits, 0);
}

TEST(PrefixCacheOn, RepeatedPromptReusesAllButItsLastPageAndScoreReusesNothing) {
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
