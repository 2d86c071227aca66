// The public API end to end on SmolLM2-135M: chat messages through the model's
// template give the known greedy answer (as tests/model/smollm2_e2e_test does
// through the single-sequence engine), stop strings and stop tokens end a
// request where they should, bad requests are refused at submit, and score()
// returns the logits of the single-sequence prefill, bit for bit (and with
// ScoreOptions, those of a prefix prefill followed by decode steps or fixed
// pieces).
#include <gtest/gtest.h>

#include <algorithm>

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
  EXPECT_EQ(k.window_bytes_per_seq, 0u);  // no sliding-window layers
  EXPECT_EQ(k.format_bits_per_elem, 16.0);
  EXPECT_EQ(eng->kv_max_context(k.bytes_per_token * 1000 + 1), 1000);
  EXPECT_EQ(eng->kv_max_context(k.bytes_per_token - 1), 0);
  const EngineStats s = eng->stats();
  EXPECT_EQ(s.kv_pages_total, (k.pool_tokens + 63) / 64);
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
  // SmolLM2 has a BOS token, but its metadata does not ask encode() to add it.
  const Tokenizer& tok = eng->tokenizer();
  ASSERT_GE(tok.bos_id(), 0);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_NE(tok.encode("hi", true, false)[0], tok.bos_id());
}

TEST(ApiEngine, KvInfoOfAQuantizedCache) {
  TKV_REQUIRE_SMOLLM2();
  EngineConfig c = smollm2_config(512, 1);
  c.kv = KvConfig::parse("turbo").value();  // k8v3
  c.quant_start = 64;
  auto eng = make_engine(c);
  ASSERT_TRUE(eng);
  const KvInfo k = eng->kv_info();
  // head_dim 64: 64 key bytes + 24 value bytes + 6 fp16 scales per 32 -> 100 B per row.
  EXPECT_EQ(k.format_bits_per_elem, 8.0 * 100 / 128);
  EXPECT_EQ(k.bytes_per_token, 30u * 3 * 100);
  // The first 64 tokens cost bf16 (23040 B/token), the rest the scheme's.
  const size_t budget = 64 * 23040 + 500 * k.bytes_per_token;
  EXPECT_EQ(eng->kv_max_context(budget), 564);
  EXPECT_EQ(eng->kv_max_context(10 * 23040), 10);
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

// The old single-sequence engine: prefill of tokens[0, p) without logits, then
// pieces of k tokens with all their logits (k = 1: decode()).
std::vector<float> reference_pieces(const std::vector<int32_t>& toks, size_t p, size_t k) {
  tkv::runtime::EngineOptions o;
  o.model_path = tkv::testing::smollm2_path();
  o.n_threads = 2;
  o.cache.max_tokens = 1024;
  auto ref = tkv::runtime::Engine::create(o);
  EXPECT_TRUE(ref.ok());
  if (!ref.ok()) return {};
  tkv::runtime::Engine& e = *ref.value();
  const int seq = e.cache().create_seq().value();
  std::vector<float> out, l;
  EXPECT_TRUE(e.prefill(seq, {toks.begin(), toks.begin() + p}, &l, false).ok());
  for (size_t i = p; i < toks.size(); i += k) {
    const size_t m = std::min(k, toks.size() - i);
    const Status st = m == 1 ? e.decode(seq, toks[i], &l)
                             : e.prefill(seq, {toks.begin() + i, toks.begin() + i + m}, &l, true);
    EXPECT_TRUE(st.ok()) << st.message();
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// eval's two protocols through score(): serving-kl (a prefix, then one token a
// step: the decode path) and wikitext (a first half, then fixed pieces).
TEST(ApiEngine, ScoreFromAPositionInFixedSteps) {
  TKV_REQUIRE_SMOLLM2();
  auto eng = make_engine(smollm2_config(1024, 1));
  ASSERT_TRUE(eng);
  const int64_t nv = eng->model_info().n_vocab;
  const size_t n = kSanitized ? 40 : 300, p = kSanitized ? 30 : 200;
  const std::vector<int32_t> toks = prompt_of(eng->tokenizer(), n);
  for (const size_t k : {size_t{1}, size_t{32}}) {
    SCOPED_TRACE(k);
    std::vector<float> got;
    std::vector<int64_t> pos0s, rows;
    ASSERT_TRUE(eng->score(toks,
                           [&](int64_t pos0, int64_t r, const float* l) {
                             pos0s.push_back(pos0);
                             rows.push_back(r);
                             got.insert(got.end(), l, l + r * nv);
                           },
                           {static_cast<int64_t>(p), static_cast<int64_t>(k)})
                    .ok());
    std::vector<int64_t> want_pos0, want_rows;
    for (size_t i = p; i < n; i += k) {
      want_pos0.push_back(static_cast<int64_t>(i));
      want_rows.push_back(static_cast<int64_t>(std::min(k, n - i)));
    }
    EXPECT_EQ(pos0s, want_pos0);
    EXPECT_EQ(rows, want_rows);
    const std::vector<float> want = reference_pieces(toks, p, k);
    ASSERT_EQ(got.size(), want.size());
    size_t diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff += got[i] != want[i];
    EXPECT_EQ(diff, 0u) << "of " << got.size() << " logits";
  }
  const auto none = [](int64_t, int64_t, const float*) {};
  const Status past = eng->score(toks, none, {static_cast<int64_t>(n), 0});
  EXPECT_NE(past.message().find("logits_from " + std::to_string(n) + " out of range (valid: 0 to " +
                                std::to_string(n - 1) + ")"),
            std::string::npos)
      << past.message();
  const Status neg = eng->score(toks, none, {0, -1});
  EXPECT_NE(neg.message().find("tokens_per_step -1 out of range"), std::string::npos)
      << neg.message();
  EXPECT_EQ(eng->stats().kv_pages_used, 0);
}

}  // namespace
}  // namespace turbokv
