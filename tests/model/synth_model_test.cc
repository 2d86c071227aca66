// Synthetic models (model/synth_model.h): tiny ones in each weight format and
// architecture load with turbokv's own loader and decode a few steps with finite
// logits; weights have the calibrated spread; a seed reproduces a file; bad
// shapes are refused with the flag named and leave no file. Needs the SmolLM2
// file (the tokenizer source); skips with a reason when it is absent.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "kernels/matmul/matmul.h"
#include "model/model.h"
#include "model/synth_model.h"
#include "tests/model/test_models.h"

namespace tkv {
namespace {

model::SynthSpec tiny(const std::string& arch, ggml::Type type) {
  model::SynthSpec s;
  s.arch = arch;
  s.n_layers = 2;
  s.d_model = 256;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.d_ff = 512;
  s.n_ctx = 256;
  s.sliding_window = 4;  // gemma3: decode below steps past the window
  s.type = type;
  s.seed = 1;
  s.tokenizer_path = testing::smollm2_path();
  return s;
}

std::string out_path(const std::string& name) {
  return ::testing::TempDir() + name;
}

// Prefill 3 tokens, then 4 single-token decode steps; every logit must be finite.
void decode_finite(const model::Model& m, const std::string& what) {
  kv::CacheOptions o;
  o.max_tokens = 64;
  o.budget_bytes = size_t{1} << 28;
  auto cache = kv::create_cache(m.kv_shape(), o);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  auto seq = cache.value()->create_seq();
  ASSERT_TRUE(seq.ok());
  ThreadPool pool(1);
  model::Workspace ws;
  std::vector<int32_t> toks = {1, 42, 7};
  const int64_t n_vocab = m.config().n_vocab;
  for (int step = 0; step < 5; ++step) {
    model::Batch b;
    b.add(seq.value(), toks.data(), static_cast<int64_t>(toks.size()), model::LogitsWanted::kLast);
    ASSERT_TRUE(m.forward(b, ws, *cache.value(), pool).ok()) << what;
    const float* lg = ws.slice_logits(0, n_vocab);
    int32_t best = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      ASSERT_TRUE(std::isfinite(lg[i])) << what << " step " << step << " logit " << i;
      if (lg[i] > lg[best]) best = static_cast<int32_t>(i);
    }
    toks = {best};
  }
}

TEST(SynthModel, TinyModelsLoadAndDecodeFinite) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 (tokenizer) absent";
  for (const std::string arch : {"llama", "qwen2", "gemma3"}) {
    for (ggml::Type t :
         {ggml::Type::kQ4_0, ggml::Type::kQ8_0, ggml::Type::kQ4_K, ggml::Type::kF16}) {
      const std::string what = arch + " " + std::string(ggml::traits(t).name);
      const std::string path = out_path("synth_" + arch + ".gguf");
      auto w = model::write_synth_model(tiny(arch, t), path);
      ASSERT_TRUE(w.ok()) << what << ": " << w.status().message();
      EXPECT_EQ(w.value().n_vocab, 49152) << what;  // SmolLM2's vocabulary
      auto m = model::Model::load(path);
      ASSERT_TRUE(m.ok()) << what << ": " << m.status().message();
      const model::ModelConfig& c = m.value()->config();
      EXPECT_EQ(c.arch, arch);
      EXPECT_EQ(c.n_layers, 2);
      EXPECT_EQ(c.d_model, 256);
      EXPECT_EQ(c.n_heads, 4);
      EXPECT_EQ(c.n_kv_heads, 2);
      EXPECT_EQ(c.head_dim, 64);
      EXPECT_EQ(c.d_ff, 512);
      EXPECT_EQ(c.name, "synthetic " + arch + " custom shape, random weights: speed only");
      decode_finite(*m.value(), what);
    }
  }
}

// Depth: 32 layers (the llama3-8b preset's count) at a narrow width stay finite.
TEST(SynthModel, ThirtyTwoLayersStayFinite) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 (tokenizer) absent";
  for (ggml::Type t : {ggml::Type::kQ4_0, ggml::Type::kQ6_K, ggml::Type::kBF16}) {
    model::SynthSpec s = tiny("llama", t);
    s.n_layers = 32;
    const std::string path = out_path("synth_deep.gguf");
    ASSERT_TRUE(model::write_synth_model(s, path).ok());
    auto m = model::Model::load(path);
    ASSERT_TRUE(m.ok()) << m.status().message();
    decode_finite(*m.value(), "32 layers " + std::string(ggml::traits(t).name));
  }
}

TEST(SynthModel, WeightsHaveTheCalibratedSpread) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 (tokenizer) absent";
  const std::string path = out_path("synth_spread.gguf");
  ASSERT_TRUE(model::write_synth_model(tiny("llama", ggml::Type::kQ4_K), path).ok());
  auto g = io::GgufFile::open(path);
  ASSERT_TRUE(g.ok());
  // ffn_down: d_in = d_ff = 512, so std ~ 1/sqrt(512); bounds as in ggml/synth_test.cc.
  const io::GgufTensorInfo* t = g.value()->find_tensor("blk.1.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  std::vector<float> y(static_cast<size_t>(t->n_elems()));
  kernels::dequantize_row(t->type, t->data, y.data(), t->n_elems());
  double sum = 0, sq = 0;
  for (float v : y) sum += v, sq += double{v} * v;
  const double n = static_cast<double>(y.size()), mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean), sigma = 1.0 / std::sqrt(512.0);
  EXPECT_LT(std::fabs(mean), 0.1 * sigma);
  EXPECT_GT(sd, 0.8 * sigma);
  EXPECT_LT(sd, 1.25 * sigma);
  const io::GgufTensorInfo* norm = g.value()->find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, ggml::Type::kF32);
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(SynthModel, SeedReproducesTheFile) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 (tokenizer) absent";
  model::SynthSpec s = tiny("llama", ggml::Type::kQ4_0);
  const std::string a = out_path("synth_a.gguf"), b = out_path("synth_b.gguf"),
                    c = out_path("synth_c.gguf");
  ASSERT_TRUE(model::write_synth_model(s, a).ok());
  ASSERT_TRUE(model::write_synth_model(s, b).ok());
  s.seed = 2;
  ASSERT_TRUE(model::write_synth_model(s, c).ok());
  EXPECT_TRUE(slurp(a) == slurp(b));
  EXPECT_FALSE(slurp(a) == slurp(c));
}

void expect_refused(const model::SynthSpec& s, const std::string& needle) {
  const std::string path = out_path("synth_bad.gguf");
  std::filesystem::remove(path);
  auto r = model::write_synth_model(s, path);
  ASSERT_FALSE(r.ok()) << "wrote a bad shape; wanted: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SynthModel, BadShapesAreRefused) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 (tokenizer) absent";
  model::SynthSpec s = tiny("llama", ggml::Type::kQ4_0);
  s.n_kv_heads = 3;
  expect_refused(s, "--kv-heads 3 must divide --heads 4");
  s = tiny("llama", ggml::Type::kQ4_0);
  s.head_dim = 32;  // 4 x 32 = 128 != 256: only gemma3 may do that
  expect_refused(s, "--heads 4 x --head-dim 32 = 128 must equal --d-model 256 for llama");
  s = tiny("llama", ggml::Type::kQ4_K);
  s.d_model = 128;
  s.head_dim = 32;
  expect_refused(s, "--d-model 128 is not a multiple of q4_K's block of 256");
  s = tiny("llama", ggml::Type::kQ4_K);
  s.d_ff = 640;
  expect_refused(s, "--ff 640 is not a multiple of q4_K's block of 256");
  s = tiny("llama", ggml::Type::kQ8_K);
  expect_refused(s, "type q8_K cannot be written");
  s = tiny("llama", ggml::Type::kQ4_0);
  s.n_layers = 0;
  expect_refused(s, "--layers 0 out of range");
  s = tiny("llama", ggml::Type::kQ4_0);
  s.tokenizer_path = "/nonexistent.gguf";
  expect_refused(s, "/nonexistent.gguf");
  s = tiny("gemma3", ggml::Type::kQ4_0);
  s.head_dim = 128;  // 4 x 128 = 512 != 256 is fine for gemma3
  EXPECT_TRUE(model::write_synth_model(s, out_path("synth_g.gguf")).ok());
  s.sliding_window = 1000;
  expect_refused(s, "--window 1000 out of range [1, --ctx 256]");
}

TEST(SynthModel, ParsesWeightTypes) {
  EXPECT_EQ(model::parse_weight_type("Q4_K").value(), ggml::Type::kQ4_K);
  EXPECT_EQ(model::parse_weight_type("bf16").value(), ggml::Type::kBF16);
  const Status st = model::parse_weight_type("q8_1").status();
  EXPECT_NE(st.message().find("unknown weight type 'q8_1' (valid: f32, f16, bf16, q4_0"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace tkv
