// The public API end to end on SmolLM2-135M: chat messages through the model's
// template give the known greedy answer (as tests/model/smollm2_e2e_test does
// through the single-sequence engine), stop strings and stop tokens end a
// request where they should, bad requests are refused at submit, and score()
// returns the logits of the single-sequence prefill, bit for bit.
#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

Request chat(const std::string& user, int64_t n) {
  Request r;
  r.messages = {{"user", user}};
  r.sampling.temperature = 0;
  r.max_tokens = n;
  return r;
}

TEST(ApiEngine, ModelInfoAndKvInfo) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(512, 4));
  ASSERT_TRUE(eng);
  const ModelInfo& m = eng->model_info();
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.n_layers, 30);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.n_kv_heads, 3);
  EXPECT_EQ(m.n_vocab, 49152);
  EXPECT_TRUE(m.has_chat_template);
  const KvInfo k = eng->kv_info();
  EXPECT_EQ(k.scheme, "bf16");
  EXPECT_EQ(k.bytes_per_token, 30u * 3 * 64 * 2 * 2);  // layers * kv heads * (K + V) bf16
  EXPECT_EQ(k.context, 512);
  EXPECT_GE(k.pool_tokens, 512);
  EXPECT_LE(k.pool_tokens, 4 * 512);
  const EngineStats s = eng->stats();
  EXPECT_EQ(s.kv_pages_total, (k.pool_tokens + 63) / 64);
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
}

TEST(ApiEngine, ChatGreedyIsTheKnownAnswer) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(1024, 2));
  ASSERT_TRUE(eng);
  auto c = eng->generate(chat("What are the three primary colors?", 16));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().text.rfind("The three primary colors are: Red, Blue, and Yellow.", 0), 0u)
      << c.value().text;
  EXPECT_EQ(c.value().finish, FinishReason::kLength);
  EXPECT_EQ(c.value().tokens.size(), 16u);
  EXPECT_EQ(c.value().timings.decode_tokens, 15);
  EXPECT_GT(c.value().timings.prefill_tokens, 10);
  EXPECT_GT(c.value().timings.ttft_ms, 0);
}

TEST(ApiEngine, StopStringEndsTheTextRightBeforeIt) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(1024, 2));
  ASSERT_TRUE(eng);
  Request r = chat("What are the three primary colors?", 32);
  r.stop = {"Blue"};
  auto c = eng->generate(r);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().finish, FinishReason::kStopString);
  EXPECT_EQ(c.value().text, "The three primary colors are: Red, ");
}

TEST(ApiEngine, StopTokenAndEos) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(1024, 2));
  ASSERT_TRUE(eng);
  auto full = eng->generate(chat("What are the three primary colors?", 8));
  ASSERT_TRUE(full.ok());
  ASSERT_GE(full.value().tokens.size(), 4u);
  Request r = chat("What are the three primary colors?", 8);
  r.stop_tokens = {full.value().tokens[3]};
  auto c = eng->generate(r);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().finish, FinishReason::kStopToken);
  EXPECT_EQ(c.value().tokens,
            std::vector<int32_t>(full.value().tokens.begin(), full.value().tokens.begin() + 3));
  // Greedy chat ends with the end-of-turn token when given room.
  auto eos = eng->generate(chat("Say hi.", 200));
  ASSERT_TRUE(eos.ok());
  EXPECT_EQ(eos.value().finish, FinishReason::kEos);
  EXPECT_LT(eos.value().tokens.size(), 200u);
}

TEST(ApiEngine, BadRequestsAreRefusedAtSubmit) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(64, 2));
  ASSERT_TRUE(eng);
  Request empty;
  auto a = eng->submit(empty);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("empty prompt"), std::string::npos);
  auto b = eng->submit(greedy(prompt_of(eng->tokenizer(), 65), 1));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("prompt of 65 tokens does not fit the context of 64"),
            std::string::npos)
      << b.status().message();
  auto c = eng->submit(greedy({1, 2, 49152}, 1));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("token id 49152 out of range (valid: 0 to 49151)"),
            std::string::npos)
      << c.status().message();
  Request d = greedy({1, 2}, 1);
  d.sampling.top_p = 2;
  auto dd = eng->submit(d);
  ASSERT_FALSE(dd.ok());
  EXPECT_NE(dd.status().message().find("top-p 2"), std::string::npos) << dd.status().message();
}

TEST(ApiEngine, ScoreGivesTheSingleSequencePrefillLogits) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(1024, 2));
  ASSERT_TRUE(eng);
  const size_t n = kSanitized ? 40 : 600;  // > one step of 512: two chunks
  const std::vector<int32_t> toks = prompt_of(eng->tokenizer(), n);
  const int64_t nv = eng->model_info().n_vocab;
  std::vector<float> got;
  int64_t next_pos = 0;
  ASSERT_TRUE(eng->score(toks,
                         [&](int64_t pos0, int64_t rows, const float* l) {
                           EXPECT_EQ(pos0, next_pos);
                           next_pos += rows;
                           got.insert(got.end(), l, l + rows * nv);
                         })
                  .ok());
  ASSERT_EQ(next_pos, static_cast<int64_t>(n));

  tkv::runtime::EngineOptions o;
  o.model_path = tkv::testing::smollm2_path();
  o.n_threads = 2;
  o.cache.max_tokens = 1024;
  auto ref = tkv::runtime::Engine::create(o);
  ASSERT_TRUE(ref.ok());
  auto seq = ref.value()->cache().create_seq();
  std::vector<float> want;
  ASSERT_TRUE(ref.value()->prefill(seq.value(), toks, &want, true).ok());
  ASSERT_EQ(got.size(), want.size());
  // The same kernels in the same order (chunks of 512 both): bit-equal.
  size_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
  EXPECT_EQ(diff, 0u) << "of " << got.size() << " logits";
}

}  // namespace
}  // namespace turbokv
