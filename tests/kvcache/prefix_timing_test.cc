// Prints what a prefix hit saves (label slow, no assertion on time): SmolLM2,
// bf16 and turbo, a prompt prefilled cold vs after attaching the same prompt
// published by an earlier sequence: 2048 tokens (1984 reused, the largest page
// multiple below 2048, 64 computed) and 2049 tokens (2048 reused, 1 computed).
// One cold run (seconds), best of 3 hits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "base/timer.h"
#include "tests/kvcache/prefix_e2e_util.h"

namespace tkv {
namespace {

TEST(PrefixTiming, ColdVsHit) {
  if (!testing::have(testing::smollm2_path()))
    GTEST_SKIP() << "model missing: " << testing::smollm2_path();
  for (const char* scheme : {"bf16", "turbo"}) {
    auto e = prefix_test::engine(scheme);
    ASSERT_TRUE(e);
    auto& kv = e->cache();
    const std::vector<int32_t> all = prefix_test::text_tokens(*e, 2049);
    std::vector<float> lg;
    for (size_t n : {size_t{2049}, size_t{2048}}) {
      const std::vector<int32_t> prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
      // Cold (once: seconds), then published for the hits (the 2049 run publishes all).
      const int s = kv.create_seq().value();
      Timer t;
      ASSERT_TRUE(e->prefill(s, prompt, &lg).ok());
      const double cold_ms = t.elapsed_ms();
      kv.publish_prefix(s, prompt.data(), static_cast<int64_t>(n));
      kv.free_seq(s);
      double hit_ms = 1e30;
      int64_t reused = 0;
      for (int rep = 0; rep < 3; ++rep) {
        const int h = kv.create_seq().value();
        t.reset();
        reused = kv.attach_prefix(h, prompt.data(), static_cast<int64_t>(n));
        ASSERT_TRUE(e->prefill(h, {prompt.begin() + reused, prompt.end()}, &lg).ok());
        hit_ms = std::min(hit_ms, t.elapsed_ms());
        kv.free_seq(h);
      }
      std::printf(
          "%-6s prompt %zu: cold %.1f ms, hit (%lld reused, %lld computed) %.1f ms, %.0fx\n",
          scheme, n, cold_ms, static_cast<long long>(reused),
          static_cast<long long>(static_cast<int64_t>(n) - reused), hit_ms, cold_ms / hit_ms);
      EXPECT_EQ(reused, static_cast<int64_t>((n - 1) / 64 * 64));
    }
  }
}

}  // namespace
}  // namespace tkv
