// Per-token logprobs and the OpenAI frequency/presence penalties through the
// public API on SmolLM2-135M: a sampled request's logprobs are the log-softmax
// of the model's raw logits at the sampled tokens (checked against score() over
// the same tokens, fed one per step as decode does), the top alternatives are
// sorted and contain the argmax, penalties change greedy output the way their
// definition says, and out-of-range values are refused at submit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

std::vector<Event> run(Engine& eng, const Request& r) {
  auto h = eng.submit(r);
  EXPECT_TRUE(h.ok()) << h.status().message();
  std::vector<Event> out;
  if (!h.ok()) return out;
  Event e;
  while (h.value().next(e)) out.push_back(e);
  return out;
}

TEST(ApiLogprobs, AreTheRawLogSoftmaxAtTheSampledTokens) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(512, 2));
  ASSERT_TRUE(eng);
  const int64_t nv = eng->model_info().n_vocab;
  Request r;
  r.prompt_tokens = prompt_of(eng->tokenizer(), 40);
  r.sampling.temperature = 0.9f;  // logprobs ignore temperature and truncation
  r.sampling.top_k = 20;
  r.sampling.seed = 7;
  r.max_tokens = 12;
  r.ignore_eos = true;
  r.logprobs = 5;
  const std::vector<Event> ev = run(*eng, r);
  std::vector<Event> toks;
  for (const Event& e : ev)
    if (!e.is_final()) toks.push_back(e);
  ASSERT_EQ(toks.size(), 12u);

  // The same tokens teacher-forced: row i predicts generated token i.
  std::vector<int32_t> all = r.prompt_tokens;
  for (const Event& e : toks) all.push_back(e.token);
  const int64_t n_prompt = static_cast<int64_t>(r.prompt_tokens.size());
  std::vector<std::vector<float>> rows;
  ScoreOptions so;
  so.logits_from = n_prompt - 1;
  so.tokens_per_step = 1;
  ASSERT_TRUE(eng->score(
                     std::vector<int32_t>(all.begin(), all.end() - 1),
                     [&](int64_t, int64_t n, const float* l) {
                       for (int64_t i = 0; i < n; ++i)
                         rows.emplace_back(l + i * nv, l + (i + 1) * nv);
                     },
                     so)
                  .ok());
  ASSERT_EQ(rows.size(), toks.size());
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::vector<float>& l = rows[i];
    const float mx = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (float x : l) z += std::exp(static_cast<double>(x) - mx);
    const double log_z = mx + std::log(z);
    const Event& e = toks[i];
    EXPECT_LE(e.logprob, 0.0f);
    EXPECT_NEAR(e.logprob, l[static_cast<size_t>(e.token)] - log_z, 0.02) << "token " << i;
    ASSERT_EQ(e.top_logprobs.size(), 5u);
    for (size_t j = 1; j < 5; ++j)
      EXPECT_GE(e.top_logprobs[j - 1].logprob, e.top_logprobs[j].logprob);
    const auto best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_NEAR(e.top_logprobs[0].logprob, mx - log_z, 0.02);
    bool has_best = false;
    for (const auto& t : e.top_logprobs) has_best |= t.token == best;
    EXPECT_TRUE(has_best) << "token " << i;
    // The sampled token is in the top 20 (top_k), so if it is in the top 5 the
    // entry carries the same logprob.
    for (const auto& t : e.top_logprobs) {
      if (t.token == e.token) {
        EXPECT_FLOAT_EQ(t.logprob, e.logprob);
      }
    }
  }
}

TEST(ApiLogprobs, OffByDefaultAndZeroGivesOnlyTheSampledToken) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(256, 1));
  ASSERT_TRUE(eng);
  Request r;
  r.prompt_tokens = prompt_of(eng->tokenizer(), 10);
  r.sampling.temperature = 0;
  r.max_tokens = 3;
  r.ignore_eos = true;
  for (const Event& e : run(*eng, r)) {
    EXPECT_EQ(e.logprob, 0.0f);
    EXPECT_TRUE(e.top_logprobs.empty());
  }
  r.logprobs = 0;
  for (const Event& e : run(*eng, r)) {
    if (e.is_final()) continue;
    EXPECT_LT(e.logprob, 0.0f);
    EXPECT_TRUE(e.top_logprobs.empty());
  }
}

// Greedy with a frequency penalty: the penalised run repeats tokens less than
// the plain one on a prompt that makes SmolLM2 loop, and its first token
// (nothing generated yet, so nothing penalised) is the same.
TEST(ApiPenalties, FrequencyPenaltyCutsRepetition) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(512, 1));
  ASSERT_TRUE(eng);
  Request r;
  r.prompt_tokens = eng->tokenizer().encode("one two one two one two one two", true, false);
  r.sampling.temperature = 0;
  r.max_tokens = 32;
  r.ignore_eos = true;
  auto plain = eng->generate(r);
  ASSERT_TRUE(plain.ok());
  r.sampling.frequency_penalty = 2.0f;
  auto pen = eng->generate(r);
  ASSERT_TRUE(pen.ok());
  ASSERT_FALSE(plain.value().tokens.empty());
  ASSERT_FALSE(pen.value().tokens.empty());
  EXPECT_EQ(plain.value().tokens[0], pen.value().tokens[0]);
  auto max_count = [](const std::vector<int32_t>& t) {
    std::map<int32_t, int> c;
    int m = 0;
    for (int32_t x : t) m = std::max(m, ++c[x]);
    return m;
  };
  EXPECT_LT(max_count(pen.value().tokens), max_count(plain.value().tokens));
  r.sampling.frequency_penalty = 0;
  r.sampling.presence_penalty = 2.0f;
  auto pres = eng->generate(r);
  ASSERT_TRUE(pres.ok());
  EXPECT_NE(pres.value().tokens, plain.value().tokens);
}

TEST(ApiPenalties, OutOfRangeValuesAreRefusedAtSubmit) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(256, 1));
  ASSERT_TRUE(eng);
  Request r;
  r.prompt_tokens = prompt_of(eng->tokenizer(), 5);
  r.sampling.frequency_penalty = 2.5f;
  auto a = eng->submit(r);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("frequency-penalty"), std::string::npos);
  r.sampling.frequency_penalty = 0;
  r.sampling.presence_penalty = -2.01f;
  EXPECT_FALSE(eng->submit(r).ok());
  r.sampling.presence_penalty = 0;
  r.logprobs = 21;
  auto c = eng->submit(r);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("logprobs 21"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace turbokv
