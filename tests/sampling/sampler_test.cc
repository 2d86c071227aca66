// Sampler: greedy, seeded reproducibility, top-k / top-p / min-p support sets,
// repetition, frequency and presence penalties; token_logprobs.
#include "sampling/sampler.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

namespace tkv::sampling {
namespace {

std::vector<float> logits_ramp(int n) {
  std::vector<float> l(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) l[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i);
  return l;
}

TEST(Sampler, GreedyPicksArgmax) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  auto l = logits_ramp(100);
  l[37] = 100;
  EXPECT_EQ(s.sample(l.data(), 100, {}, 0), 37);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 42;
  auto l = logits_ramp(50);
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.sample(l.data(), 50, {}, 0));
    tb.push_back(b.sample(l.data(), 50, {}, 0));
  }
  EXPECT_EQ(ta, tb);
  std::set<int32_t> distinct(ta.begin(), ta.end());
  EXPECT_GT(distinct.size(), 5u);  // really samples
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> tc;
  for (int i = 0; i < 200; ++i) tc.push_back(c.sample(l.data(), 50, {}, 0));
  EXPECT_NE(ta, tc);
}

TEST(Sampler, TopKRestrictsSupport) {
  SamplerParams p;
  p.temperature = 5.0f;
  p.top_k = 3;
  p.top_p = 1.0f;
  p.min_p = 0;
  Sampler s(p);
  auto l = logits_ramp(100);
  for (int i = 0; i < 300; ++i) EXPECT_GE(s.sample(l.data(), 100, {}, 0), 97);
}

TEST(Sampler, TopPAndMinPRestrictSupport) {
  std::vector<float> l = {10.0f, 9.5f, 0.0f, -1.0f, -2.0f};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.9f;  // first two tokens carry > 0.99 of the mass
  p.min_p = 0;
  Sampler s(p);
  for (int i = 0; i < 300; ++i) EXPECT_LT(s.sample(l.data(), 5, {}, 0), 2);
  p.top_p = 1.0f;
  p.min_p = 0.7f;  // p1/p0 = e^-0.5 = 0.61 < 0.7 -> only token 0
  Sampler m(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(m.sample(l.data(), 5, {}, 0), 0);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> l = {2.0f, 1.9f, 0.0f};
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  EXPECT_EQ(s.sample(l.data(), 3, {}, 0), 0);
  EXPECT_EQ(s.sample(l.data(), 3, {0}, 0), 1);  // 2.0/1.5 < 1.9
}

// frequency/presence: logit -= f * count + p * (count > 0), counting only the
// generated tokens (history past n_prompt).
TEST(Sampler, FrequencyAndPresencePenaltiesCountGeneratedTokensOnly) {
  const std::vector<float> l = {3.0f, 2.5f, 2.2f, 0.0f};
  SamplerParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.3f;
  Sampler s(p);
  // Token 0 twice in the prompt only: no penalty.
  EXPECT_EQ(s.sample(l.data(), 4, {0, 0}, 2), 0);
  // Generated once: 3.0 - 0.3 = 2.7 > 2.5, still first.
  EXPECT_EQ(s.sample(l.data(), 4, {0, 0}, 1), 0);
  // Generated twice: 3.0 - 0.6 = 2.4 < 2.5.
  EXPECT_EQ(s.sample(l.data(), 4, {0, 0}, 0), 1);
  // Generated twice, token 1 once: 2.4 vs 2.2 vs 2.2 (ties go to the lower id).
  EXPECT_EQ(s.sample(l.data(), 4, {0, 1, 0}, 0), 0);
  p.frequency_penalty = 0;
  p.presence_penalty = 0.6f;  // count does not matter, only presence
  Sampler q(p);
  EXPECT_EQ(q.sample(l.data(), 4, {0}, 0), 1);           // 2.4 < 2.5
  EXPECT_EQ(q.sample(l.data(), 4, {0, 0, 0, 0}, 0), 1);  // still 2.4
  EXPECT_EQ(q.sample(l.data(), 4, {0, 1}, 0), 0);        // 2.4, 1.9, 2.2
  p.presence_penalty = -1.0f;                            // negative: encourages repeats
  Sampler r(p);
  EXPECT_EQ(r.sample(l.data(), 4, {3}, 0), 0);  // 0 + 1 = 1 < 3
  EXPECT_EQ(r.sample(l.data(), 4, {2}, 0), 2);  // 3.2 > 3.0
}

TEST(TokenLogprobs, MatchLogSoftmaxAndSortTopByProbability) {
  const std::vector<float> l = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  std::vector<TokenLogprob> top;
  const float lp = token_logprobs(l.data(), 5, 4, 3, &top);
  EXPECT_NEAR(lp, 0.5 - std::log(z), 1e-6);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);  // tie with 3: lower id first
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 0);
  for (const auto& t : top)
    EXPECT_NEAR(t.logprob, l[static_cast<size_t>(t.token)] - std::log(z), 1e-6);
  double mass = 0;
  for (int t = 0; t < 5; ++t) mass += std::exp(token_logprobs(l.data(), 5, t, 0, &top));
  EXPECT_NEAR(mass, 1.0, 1e-6);
  EXPECT_TRUE(top.empty());
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 999.0f};
  EXPECT_NEAR(token_logprobs(big.data(), 2, 0, 0, nullptr), -std::log1p(std::exp(-1.0)), 1e-5);
}

TEST(SamplerValidate, DefaultsAreValid) {
  EXPECT_TRUE(validate(SamplerParams{}).ok());
}

TEST(SamplerValidate, RejectsEachOutOfRangeField) {
  struct Case {
    void (*set)(SamplerParams&);
    const char* name;
  };
  const Case cases[] = {
      {[](SamplerParams& p) { p.temperature = std::nanf(""); }, "temperature nan"},
      {[](SamplerParams& p) { p.temperature = -0.5f; }, "temperature -0.5"},
      {[](SamplerParams& p) { p.top_k = -1; }, "top-k -1"},
      {[](SamplerParams& p) { p.top_p = 5; }, "top-p 5"},
      {[](SamplerParams& p) { p.top_p = 0; }, "top-p 0"},
      {[](SamplerParams& p) { p.min_p = 1.5f; }, "min-p 1.5"},
      {[](SamplerParams& p) { p.repeat_penalty = 0; }, "repeat-penalty 0"},
      {[](SamplerParams& p) { p.repeat_penalty = INFINITY; }, "repeat-penalty inf"},
      {[](SamplerParams& p) { p.repeat_last_n = -2; }, "repeat-last-n -2"},
      {[](SamplerParams& p) { p.frequency_penalty = 2.5f; }, "frequency-penalty 2.5"},
      {[](SamplerParams& p) { p.frequency_penalty = std::nanf(""); }, "frequency-penalty nan"},
      {[](SamplerParams& p) { p.presence_penalty = -3; }, "presence-penalty -3"},
  };
  for (const auto& c : cases) {
    SamplerParams p;
    c.set(p);
    const Status st = validate(p);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_NE(st.message().find(c.name), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("valid:"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tkv::sampling
