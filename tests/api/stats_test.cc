// EngineStats::attention_ms on SmolLM2-135M: zero before any work, grows with
// every request, never more than the wall time the engine spent on it, and
// counted together with the step that spent it (what `turbokv bench` relies on).
#include <gtest/gtest.h>

#include <chrono>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

TEST(ApiStats, AttentionTimeGrowsWithEachRequestWithinTheWallTime) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(512, 2));
  ASSERT_TRUE(eng);
  EXPECT_EQ(eng->stats().attention_ms, 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  auto c = eng->generate(greedy(prompt_of(eng->tokenizer(), 200), 8));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const EngineStats s1 = wait_stats(*eng, [](const EngineStats& s) { return s.running == 0; });
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(s1.attention_ms, 0.0);
  EXPECT_LT(s1.attention_ms, wall);
  // Every step of the request is counted once it is published: 1 prefill step + 7 decodes.
  EXPECT_GE(s1.steps, 8);

  // A longer context costs more attention per token: the counter keeps growing.
  auto c2 = eng->generate(greedy(prompt_of(eng->tokenizer(), 400, 1), 8));
  ASSERT_TRUE(c2.ok());
  const EngineStats s2 =
      wait_stats(*eng, [&](const EngineStats& s) { return s.steps >= s1.steps + 8; });
  EXPECT_GT(s2.attention_ms, s1.attention_ms);
}

}  // namespace
}  // namespace turbokv
