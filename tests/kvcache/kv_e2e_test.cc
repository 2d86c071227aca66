// End to end through the engine (SmolLM2-135M-Instruct Q4_1, skipped when the
// model file is missing): greedy turbo:k8v8 reproduces bf16 for the first 32
// tokens; turbo:k8v3 stays close (teacher-forced KL / top-1 agreement on the
// bf16 continuation); fused == reference path; bad --kv-quant values are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "runtime/engine.h"

namespace tkv {
namespace {

std::string model_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/turbokv/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<runtime::Engine> engine(const std::string& scheme, kv::AttnPath path = kv::AttnPath::kFused,
                                        int64_t quant_start = 0) {
  runtime::EngineOptions o;
  o.model_path = model_path();
  o.n_threads = 2;
  o.cache.scheme = scheme;
  o.cache.attn = path;
  o.cache.quant_start = quant_start;
  o.cache.max_tokens = 512;
  o.cache.max_seqs = 2;
  auto e = runtime::Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> prompt_tokens(runtime::Engine& e) {
  auto text = e.tokenizer().apply_chat_template(
      {{"user", "Explain in two sentences why the sky is blue during the day."}}, true);
  EXPECT_TRUE(text.ok());
  return e.tokenizer().encode(text.value(), false, true);
}

std::vector<int32_t> greedy(runtime::Engine& e, const std::vector<int32_t>& prompt, int n) {
  sampling::SamplerParams sp;
  sp.temperature = 0.0f;
  std::vector<int32_t> out;
  auto seq = e.cache().create_seq();
  EXPECT_TRUE(seq.ok());
  auto st = e.generate(*seq, prompt, n, sp, [&](int32_t t, const std::string&) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.status().message();
  e.cache().free_seq(*seq);
  return out;
}

class KvE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "model missing: " << model_path();
  }
};

TEST_F(KvE2e, TurboK8v8GreedyMatchesBf16For32Tokens) {
  auto bf = engine("bf16");
  auto tq = engine("turbo:k8v8");
  ASSERT_TRUE(bf && tq);
  const auto prompt = prompt_tokens(*bf);
  const auto a = greedy(*bf, prompt, 32), b = greedy(*tq, prompt, 32);
  ASSERT_GE(a.size(), 32u) << "bf16 stopped early";
  for (size_t i = 0; i < 32; ++i) ASSERT_EQ(a[i], b[i]) << "first divergence at token " << i;
}

// Teacher-forced on the bf16 greedy continuation: mean KL(bf16 || scheme) of the
// next-token distributions and top-1 agreement. The bounds are the spec §6 scale
// (k8v3 KL 0.03 on a 1B model) with head-room for a 135M model, not derived.
TEST_F(KvE2e, TurboK8v3StaysCloseToBf16) {
  auto bf = engine("bf16");
  ASSERT_TRUE(bf);
  auto prompt = prompt_tokens(*bf);
  const auto cont = greedy(*bf, prompt, 48);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), cont.begin(), cont.end());
  const int64_t nv = bf->model().config().n_vocab;
  const auto logits_of = [&](runtime::Engine& e) {
    std::vector<float> lg;
    auto seq = e.cache().create_seq();
    EXPECT_TRUE(e.prefill(*seq, all, &lg, true).ok());
    e.cache().free_seq(*seq);
    return lg;
  };
  const auto ref = logits_of(*bf);
  for (const char* scheme : {"turbo", "turbo:k8v8"}) {
    auto tq = engine(scheme);
    ASSERT_TRUE(tq);
    const auto got = logits_of(*tq);
    double kl_sum = 0;
    int agree = 0, n = 0;
    for (size_t t = prompt.size() - 1; t + 1 < all.size(); ++t, ++n) {
      const float* p = ref.data() + t * nv;
      const float* q = got.data() + t * nv;
      const double mp = *std::max_element(p, p + nv), mq = *std::max_element(q, q + nv);
      double zp = 0, zq = 0;
      for (int64_t i = 0; i < nv; ++i) zp += std::exp(p[i] - mp), zq += std::exp(q[i] - mq);
      double kl = 0;
      for (int64_t i = 0; i < nv; ++i) {
        const double lp = p[i] - mp - std::log(zp), lq = q[i] - mq - std::log(zq);
        kl += std::exp(lp) * (lp - lq);
      }
      kl_sum += kl;
      agree += (std::max_element(p, p + nv) - p) == (std::max_element(q, q + nv) - q);
    }
    const double mean_kl = kl_sum / n;
    std::printf("%s: mean KL vs bf16 %.5f, top-1 agreement %d/%d\n", scheme, mean_kl, agree, n);
    EXPECT_LT(mean_kl, 0.15) << scheme;
    EXPECT_GE(agree, n * 8 / 10) << scheme;
  }
}

TEST_F(KvE2e, FusedEqualsReferencePathGreedy) {
  auto f = engine("turbo", kv::AttnPath::kFused, 8);
  auto r = engine("turbo", kv::AttnPath::kReference, 8);
  ASSERT_TRUE(f && r);
  const auto prompt = prompt_tokens(*f);
  EXPECT_EQ(greedy(*f, prompt, 16), greedy(*r, prompt, 16));
}

TEST_F(KvE2e, BadKvQuantIsRefusedWithValidForms) {
  for (const char* bad : {"turbo:k9v3", "int8", "turbo:k8"}) {
    runtime::EngineOptions o;
    o.model_path = model_path();
    o.cache.scheme = bad;
    auto e = runtime::Engine::create(o);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("turbo:k<K>v<V>"), std::string::npos) << e.status().message();
  }
}

}  // namespace
}  // namespace tkv
