// Sampler: greedy, seeded reproducibility, top-k / top-p / min-p support sets,
// repetition penalty direction.
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
  EXPECT_EQ(s.sample(l.data(), 100, {}), 37);
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
    ta.push_back(a.sample(l.data(), 50, {}));
    tb.push_back(b.sample(l.data(), 50, {}));
  }
  EXPECT_EQ(ta, tb);
  std::set<int32_t> distinct(ta.begin(), ta.end());
  EXPECT_GT(distinct.size(), 5u);  // really samples
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> tc;
  for (int i = 0; i < 200; ++i) tc.push_back(c.sample(l.data(), 50, {}));
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
  for (int i = 0; i < 300; ++i) EXPECT_GE(s.sample(l.data(), 100, {}), 97);
}

TEST(Sampler, TopPAndMinPRestrictSupport) {
  std::vector<float> l = {10.0f, 9.5f, 0.0f, -1.0f, -2.0f};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.9f;  // first two tokens carry > 0.99 of the mass
  p.min_p = 0;
  Sampler s(p);
  for (int i = 0; i < 300; ++i) EXPECT_LT(s.sample(l.data(), 5, {}), 2);
  p.top_p = 1.0f;
  p.min_p = 0.7f;  // p1/p0 = e^-0.5 = 0.61 < 0.7 -> only token 0
  Sampler m(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(m.sample(l.data(), 5, {}), 0);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> l = {2.0f, 1.9f, 0.0f};
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.5f;
  Sampler s(p);
  EXPECT_EQ(s.sample(l.data(), 3, {}), 0);
  EXPECT_EQ(s.sample(l.data(), 3, {0}), 1);  // 2.0/1.5 < 1.9
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
