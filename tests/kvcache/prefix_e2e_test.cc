// Prefix sharing end to end (SmolLM2-135M-Instruct Q4_1 through runtime::Engine,
// skipped when the model file is missing). Prompt P (1040 tokens; 528 under the
// sanitizers) runs cold in seq A and is published; Q = P + 10 tokens then attaches
// 1024 tokens (16 full pages, the largest page multiple below |Q|; 512 and 8) and
// prefills only the rest. The engine prefills in 512-token chunks, so the cold run
// of Q computes exactly the same chunks ([0,512), [512,1024), [1024,1050)) as A +
// the hit: the last-token
// logits must be equal bit for bit (same kernels, same order), for bf16 and for
// turbo, and greedy decoding after them identical. A trim into a shared page
// must leave the published pages intact (copy-on-write).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/kvcache/prefix_e2e_util.h"

namespace tkv {
namespace {

using prefix_test::engine;
using prefix_test::text_tokens;

int32_t argmax(const std::vector<float>& lg) {
  return static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
}

std::vector<int32_t> greedy_after(runtime::Engine& e, int seq, std::vector<float> lg, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(lg));
    EXPECT_TRUE(e.decode(seq, out.back(), &lg).ok());
  }
  return out;
}

class PrefixE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have(testing::smollm2_path()))
      GTEST_SKIP() << "model missing: " << testing::smollm2_path();
  }
};

constexpr size_t kPrompt = testing::kSanitized ? 528 : 1040, kSuffix = 10;
// floor((|Q| - 1) / 64) * 64, within P's full pages
constexpr int64_t kReused = testing::kSanitized ? 512 : 1024;
constexpr int kGreedy = testing::kSanitized ? 8 : 16;

// Seq a: P cold, published. Seq b: Q via a hit on P. Seq c: Q cold. b and c
// then decode kGreedy greedy tokens each.
struct HitVsCold {
  std::unique_ptr<runtime::Engine> e;
  std::vector<int32_t> q;
  int b = -1, c = -1;
  std::vector<float> hit_logits, cold_logits;  // Q's last token
  std::vector<int32_t> hit_greedy, cold_greedy;
};

void hit_vs_cold(const char* scheme, HitVsCold* r) {
  r->e = engine(scheme);
  ASSERT_TRUE(r->e);
  runtime::Engine& e = *r->e;
  auto& kv = e.cache();
  const std::vector<int32_t>& q = r->q = text_tokens(e, kPrompt + kSuffix);
  const std::vector<int32_t> p(q.begin(), q.begin() + kPrompt);
  std::vector<float> lg;
  const int a = kv.create_seq().value();
  ASSERT_TRUE(e.prefill(a, p, &lg).ok());
  kv.publish_prefix(a, p.data(), static_cast<int64_t>(p.size()));
  kv.free_seq(a);  // the published pages stay cached
  EXPECT_EQ(kv.prefix_stats().cached_pages, kReused / 64);

  r->b = kv.create_seq().value();
  ASSERT_EQ(kv.attach_prefix(r->b, q.data(), static_cast<int64_t>(q.size())), kReused);
  ASSERT_TRUE(e.prefill(r->b, {q.begin() + kReused, q.end()}, &r->hit_logits).ok());
  EXPECT_EQ(kv.seq_len(r->b), static_cast<int64_t>(q.size()));
  r->hit_greedy = greedy_after(e, r->b, r->hit_logits, kGreedy);

  r->c = kv.create_seq().value();
  ASSERT_TRUE(e.prefill(r->c, q, &r->cold_logits).ok());
  r->cold_greedy = greedy_after(e, r->c, r->cold_logits, kGreedy);
  const kv::PrefixStats st = kv.prefix_stats();
  EXPECT_EQ(st.lookups, 1);
  EXPECT_EQ(st.hit_tokens, kReused);
  EXPECT_EQ(st.looked_up_tokens, static_cast<int64_t>(q.size()));
}

TEST_F(PrefixE2e, TurboHitEqualsCold) {
  HitVsCold r;
  hit_vs_cold("turbo", &r);
  EXPECT_EQ(r.hit_greedy, r.cold_greedy);
  EXPECT_TRUE(r.hit_logits == r.cold_logits);
}

// Then copy-on-write: d attaches Q, trims to kReused - 24 (inside the last shared
// page) and prefills 20 other tokens, so its reserve copies that page
// first. d must equal c trimmed the same way and given the same tokens (c's pages
// are private: no copy), and a later hit g must still see the published pages:
// its logits equal c's cold ones bit for bit.
TEST_F(PrefixE2e, Bf16HitEqualsColdBitForBitAndTrimCopiesSharedPage) {
  HitVsCold r;
  hit_vs_cold("bf16", &r);
  ASSERT_EQ(r.hit_logits.size(), r.cold_logits.size());
  EXPECT_TRUE(r.hit_logits == r.cold_logits);
  EXPECT_EQ(r.hit_greedy, r.cold_greedy);

  runtime::Engine& e = *r.e;
  auto& kv = e.cache();
  const std::vector<int32_t>& q = r.q;
  kv.free_seq(r.b);
  const std::vector<int32_t> tail(q.begin() + 100, q.begin() + 120);  // other tokens at trim..
  std::vector<float> got, want;
  const int d = kv.create_seq().value();
  ASSERT_EQ(kv.attach_prefix(d, q.data(), static_cast<int64_t>(q.size())), kReused);
  kv.trim_seq(d, kReused - 24);
  ASSERT_TRUE(e.prefill(d, tail, &got).ok());
  kv.trim_seq(r.c, kReused - 24);
  ASSERT_TRUE(e.prefill(r.c, tail, &want).ok());
  EXPECT_TRUE(got == want);

  const int g = kv.create_seq().value();
  ASSERT_EQ(kv.attach_prefix(g, q.data(), static_cast<int64_t>(q.size())), kReused);
  ASSERT_TRUE(e.prefill(g, {q.begin() + kReused, q.end()}, &got).ok());
  EXPECT_TRUE(got == r.cold_logits);
  EXPECT_EQ(kv.prefix_stats().evictions, 0);
}

}  // namespace
}  // namespace tkv
