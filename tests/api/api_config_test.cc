// The public API without a real model: KvConfig parsing (typed, one parser, the
// CLI's error text), the sampling check and the refusals Engine::create makes at start (a scheme
// the model's head_dim cannot use, a KV budget below one context, bad sizes),
// on tiny in-memory GGUFs (tests/model/tiny_gguf.h).
#include <gtest/gtest.h>

#include "ops/dispatch.h"
#include "tests/model/tiny_gguf.h"
#include "turbokv/engine.h"

namespace turbokv {
namespace {

TEST(KvConfig, ParsesEveryFormTyped) {
  struct Case {
    const char* text;
    KvConfig::Kind kind;
    int k, v;
    const char* canonical;
  };
  const Case cases[] = {
      {"bf16", KvConfig::Kind::kBf16, 16, 16, "bf16"},
      {"f16", KvConfig::Kind::kF16, 16, 16, "f16"},
      {"8", KvConfig::Kind::kAffine, 8, 8, "8"},
      {"4", KvConfig::Kind::kAffine, 4, 4, "4"},
      {"turbo", KvConfig::Kind::kTurbo, 8, 3, "turbo:k8v3"},
      {"turbo:k4v3", KvConfig::Kind::kTurbo, 4, 3, "turbo:k4v3"},
      {"turbo:k2v2", KvConfig::Kind::kTurbo, 2, 2, "turbo:k2v2"},
  };
  for (const Case& c : cases) {
    auto r = KvConfig::parse(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().message();
    EXPECT_EQ(r.value().kind, c.kind) << c.text;
    EXPECT_EQ(r.value().key_bits, c.k) << c.text;
    EXPECT_EQ(r.value().value_bits, c.v) << c.text;
    EXPECT_EQ(r.value().to_string(), c.canonical);
    EXPECT_EQ(KvConfig::parse(r.value().to_string()).value(), r.value()) << c.text;
    EXPECT_EQ(r.value().is_float(),
              c.kind == KvConfig::Kind::kBf16 || c.kind == KvConfig::Kind::kF16);
  }
}

TEST(KvConfig, BadSpellingListsTheValidForms) {
  for (const char* bad : {"turbo:k9v9", "bf17", "", "turbo:k8", "16"}) {
    auto r = KvConfig::parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("turbo:k<K>v<V>"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(KvConfig, AutoWithABudget) {
  for (const char* s : {"auto", "auto:4.5", "auto:6.75"}) {
    auto r = KvConfig::parse(s);
    ASSERT_TRUE(r.ok()) << s << ": " << r.status().message();
    EXPECT_EQ(r.value().kind, KvConfig::Kind::kAuto);
    EXPECT_EQ(r.value().to_string(), s);
    EXPECT_EQ(KvConfig::parse(r.value().to_string()).value(), r.value());
  }
  EXPECT_FALSE(KvConfig::parse("auto:2").ok());
  EXPECT_FALSE(KvConfig::parse("auto:x").ok());
}

std::string tiny_path(uint32_t head_dim) {
  tkv::testing::TinySpec s;
  s.head_dim = head_dim;
  s.d_model = 4 * head_dim;
  return tkv::testing::write_temp("api_tiny_hd" + std::to_string(head_dim) + ".gguf",
                                  tkv::testing::tiny_model(s));
}

TEST(EngineCreate, RefusesASchemeTheHeadDimCannotUse) {
  EngineConfig c;
  c.model_path = tiny_path(8);
  c.kv = KvConfig::parse("turbo").value();
  c.context = 64;
  c.threads = 1;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_NE(m.find(c.model_path), std::string::npos) << m;
  EXPECT_NE(m.find("head_dim 8"), std::string::npos) << m;
  EXPECT_NE(m.find("{64, 128, 256, 512}"), std::string::npos) << m;
  EXPECT_NE(m.find("turbo:k8v3"), std::string::npos) << m;
}

TEST(EngineCreate, RefusesABudgetBelowOneContext) {
  EngineConfig c;
  c.model_path = tiny_path(8);
  c.context = 100000;
  c.kv_budget_bytes = 1 << 20;
  c.threads = 1;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_NE(m.find(c.model_path), std::string::npos) << m;
  EXPECT_NE(m.find("context of 100000 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("KV budget of 1.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("the largest context that fits is"), std::string::npos) << m;
}

TEST(EngineCreate, RefusesAStepBudgetBelowTheSequenceCount) {
  EngineConfig c;
  c.model_path = tiny_path(8);
  c.context = 64;
  c.max_seqs = 16;
  c.step_tokens = 8;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("step token budget 8"), std::string::npos)
      << e.status().message();
}

TEST(SamplingParams, ValidateNamesTheFieldAndItsRange) {
  EXPECT_TRUE(validate(SamplingParams{}).ok());
  const auto refused = [](SamplingParams p, const char* what) {
    const Status st = validate(p);
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  };
  SamplingParams p;
  p.top_p = 0;
  refused(p, "top-p 0");
  p = {};
  p.temperature = -1;
  refused(p, "temperature -1");
  p = {};
  p.presence_penalty = 3;
  refused(p, "presence-penalty 3");
}

TEST(Device, ParsesTheTwoNamesOnly) {
  EXPECT_EQ(parse_device("cpu").value(), Device::kCpu);
  EXPECT_EQ(parse_device("cuda").value(), Device::kCuda);
  auto bad = parse_device("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gpu' (valid: cpu | cuda)"), std::string::npos)
      << bad.status().message();
  EXPECT_STREQ(device_name(Device::kCuda), "cuda");
  EXPECT_EQ(EngineConfig{}.device, Device::kCpu);
}

// CI has no GPU (and usually no CUDA build): --device cuda must fail at start, saying
// why, before the model is loaded.
TEST(EngineCreate, RefusesCudaWithoutAGpu) {
  if (tkv::ops::backend_available(tkv::ops::Backend::kCuda))
    GTEST_SKIP() << "a GPU is visible: tests/cuda/forward_cuda_test covers --device cuda";
  EngineConfig c;
  c.model_path = tiny_path(64);
  c.context = 64;
  c.threads = 1;
  c.device = Device::kCuda;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  const std::string& m = e.status().message();
  EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented) << m;
  EXPECT_NE(m.find("--device cuda"), std::string::npos) << m;
  EXPECT_NE(m.find(tkv::ops::kCudaBuilt ? "no CUDA device" : "built without CUDA"),
            std::string::npos)
      << m;
}

TEST(EngineCreate, MissingModelIsNamed) {
  EngineConfig c;
  c.model_path = "/nonexistent/model.gguf";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace turbokv
