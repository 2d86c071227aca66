// Regression tests for hostile model files (issue 22): each file here crashed,
// aborted or ran away before loading validated it. Files are built in memory
// (tiny_gguf.h) or patched from the real SmolLM2 file (skipped when absent).
// Where the old code went on to crash, the test runs that step if load succeeds.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "model/model.h"
#include "tests/model/test_models.h"
#include "tests/model/tiny_gguf.h"
#include "tokenizer/tokenizer.h"

namespace tkv {
namespace {

using testing::TinySpec;

Result<std::unique_ptr<model::Model>> load(const TinySpec& s, const std::string& name) {
  return model::Model::load(testing::write_temp(name, testing::tiny_model(s)));
}

void expect_error(const Result<std::unique_ptr<model::Model>>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "loaded a hostile file";
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

// One decode step of a loaded model: where the unvalidated files crashed.
void forward_once(model::Model& m) {
  kv::CacheOptions o;
  o.max_tokens = 64;
  o.budget_bytes = size_t{1} << 30;
  auto cache = kv::create_cache(m.kv_shape(), o);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  auto seq = cache.value()->create_seq();
  ASSERT_TRUE(seq.ok());
  ThreadPool pool(1);
  const int32_t tok = 1;
  model::Batch b;
  b.add(seq.value(), &tok, 1, model::LogitsWanted::kLast);
  model::Workspace ws;
  ASSERT_TRUE(m.forward(b, ws, *cache.value(), pool).ok());
}

TEST(HostileModel, TinyModelLoadsAndRuns) {
  auto m = load(TinySpec{}, "tiny_ok.gguf");
  ASSERT_TRUE(m.ok()) << m.status().message();
  forward_once(*m.value());
}

TEST(HostileModel, RopeDimsPastHeadDimIsRefused) {
  TinySpec s;
  s.rope_dims = 16;  // head_dim 8: kernels::rope wrote past each head (heap overflow)
  auto m = load(s, "rope16.gguf");
  if (m.ok()) forward_once(*m.value());
  expect_error(m, "rope.dimension_count 16");
}

TEST(HostileModel, RopeDimsPastStackTableIsRefused) {
  TinySpec s;
  s.rope_dims = 2048;  // past the rope kernel's cs[512] table (stack overflow)
  auto m = load(s, "rope2048.gguf");
  if (m.ok()) forward_once(*m.value());
  expect_error(m, "rope.dimension_count 2048");
}

TEST(HostileModel, RopeDimsOddOrZeroAreRefused) {
  TinySpec s;
  s.rope_dims = 7;
  expect_error(load(s, "rope7.gguf"), "must be even");
  s.rope_dims = 0;
  expect_error(load(s, "rope0.gguf"), "rope.dimension_count 0");
}

TEST(HostileModel, UndequantizableNormTypeIsNamed) {
  TinySpec s;
  s.norm_type = 9;  // q8_1: known to GGUF, no dequantizer (was a TKV_CHECK abort)
  expect_error(load(s, "normq81.gguf"), "'blk.0.attn_norm.weight' has type q8_1");
}

TEST(HostileModel, HugeBlockCountIsRefusedBeforeBinding) {
  TinySpec s;
  s.block_count = 16777216;  // walked 16M layers (7.8 GB RSS) before the first error
  expect_error(load(s, "blocks16m.gguf"), "block_count' = 16777216 out of range");
  s.block_count = 1000;  // in range, but 11 tensors cannot hold 1000 layers
  expect_error(load(s, "blocks1000.gguf"), "block_count 1000 needs at least 9000 tensors");
}

TEST(HostileModel, HugeSlidingWindowIsRefused) {
  TinySpec s;
  s.arch = "gemma3";
  s.sliding_window = 9223372036854775807ull;  // overflowed ceil_div/add_group in cache sizing
  auto m = load(s, "swa_huge.gguf");
  if (m.ok()) forward_once(*m.value());
  expect_error(m, "sliding_window' = 9223372036854775807 out of range");
}

TEST(HostileModel, GqaAndHeadSpanAreChecked) {
  TinySpec s;
  s.n_kv_heads = 3;  // 4 heads are not a multiple of 3
  expect_error(load(s, "gqa3.gguf"), "not a multiple of head_count_kv 3");
  s = TinySpec{};
  s.head_dim = 16;  // llama: 4 x 16 != d_model 32
  expect_error(load(s, "span.gguf"), "must equal embedding_length 32");
}

// The finding as reported: one u32 of the real SmolLM2 file changed.
TEST(HostileModel, RealSmolLM2WithRopeDimsPastHeadDim) {
  const std::string src = testing::smollm2_path();
  if (!testing::have(src)) GTEST_SKIP() << "SmolLM2 not fetched (scripts/fetch-models)";
  std::ifstream in(src, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  const std::string key = "llama.rope.dimension_count";
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  const size_t at = static_cast<size_t>(it - bytes.begin()) + key.size();
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + at, 4);
  ASSERT_EQ(type, 4u) << "rope.dimension_count is a u32 in SmolLM2";
  const uint32_t dims = 128;  // head_dim is 64
  std::memcpy(bytes.data() + at + 4, &dims, 4);
  const std::string path = testing::write_temp("smollm2_rope128.gguf", bytes);
  auto m = model::Model::load(path);
  if (m.ok()) forward_once(*m.value());
  std::filesystem::remove(path);
  expect_error(m, "rope.dimension_count 128");
}

// A token-type array stored as doubles: 1e300 -> int32 was undefined behaviour
// (clang -fsanitize=float-cast-overflow); it is now an error naming the entry.
TEST(HostileModel, TokenTypeAsHugeDoubleIsRefused) {
  io::testing::GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  b.kv_string("tokenizer.ggml.model", "gpt2");
  b.kv_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  b.kv_array("tokenizer.ggml.token_type", 12 /*f64*/, std::vector<double>{1.0, 1e300, 1.0});
  b.kv_string_array("tokenizer.ggml.merges", {"a b"});
  const auto bytes = b.build();
  auto g = io::GgufFile::parse(bytes.data(), bytes.size(), "tt.gguf");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto t = tok::Tokenizer::from_gguf(*g.value());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("token_type[1]"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace tkv
