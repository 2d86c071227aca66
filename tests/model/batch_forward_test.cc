// A ragged batch (decode tokens and prefill chunks of several sequences in one
// step) gives each sequence the logits it gets when run alone, bit for bit: the
// matmul kernels compute each token row independently of the others (activations
// are quantized per row, outputs split by weight rows), and attention runs per
// slice through the same cache calls.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kvcache/kv_cache.h"
#include "model/model.h"
#include "tests/model/test_models.h"

namespace tkv {
namespace {

struct Case {
  int64_t context;  // tokens the sequence holds before the batched step
  int64_t n;        // tokens of its slice in the step
};
// A decode token after context, prefill chunks on both sides of the 64-token page
// boundary, one starting mid-page, and a long one (130 tokens under the
// sanitizers: every row of it wants logits).
const Case kCases[] = {{100, 1}, {0, 63}, {10, 64}, {0, 65}, {0, testing::kSanitized ? 130 : 511},
                       {37, 1}};

std::vector<int32_t> tokens_for(size_t i, int64_t n, int32_t n_vocab) {
  std::mt19937 rng(static_cast<uint32_t>(1234 + i));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
  return t;
}

class BatchForward : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchForward, RaggedBatchMatchesEachSequenceAlone) {
  ASSERT_TRUE(testing::have(testing::smollm2_path())) << "run scripts/fetch-models";
  auto m = model::Model::load(testing::smollm2_path());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const model::Model& md = *m.value();
  const int32_t nv = md.config().n_vocab;
  kv::CacheOptions o;
  o.scheme = kv::parse_kv_quant(GetParam()).value();
  o.max_tokens = 1024;
  o.max_seqs = 8;
  o.max_chunk_tokens = 1024;
  o.budget_bytes = size_t{1} << 31;
  ThreadPool pool(2);
  model::Workspace ws;

  // Alone: one cache per case, the context in one step, then the slice.
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < std::size(kCases); ++i) {
    auto cache = kv::create_cache(md.kv_shape(), o);
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    const int seq = cache.value()->create_seq().value();
    const auto toks = tokens_for(i, kCases[i].context + kCases[i].n, nv);
    model::Batch b;
    if (kCases[i].context > 0) {
      b.add(seq, toks.data(), kCases[i].context, model::LogitsWanted::kNone);
      ASSERT_TRUE(md.forward(b, ws, *cache.value(), pool).ok());
      b.clear();
    }
    b.add(seq, toks.data() + kCases[i].context, kCases[i].n, model::LogitsWanted::kAll);
    ASSERT_TRUE(md.forward(b, ws, *cache.value(), pool).ok());
    alone.emplace_back(ws.logits.begin(), ws.logits.begin() + kCases[i].n * nv);
  }

  // Together: the same contexts one by one, then every slice in one batch.
  auto cache = kv::create_cache(md.kv_shape(), o);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  model::Batch step;
  std::vector<std::vector<int32_t>> toks;
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const int seq = cache.value()->create_seq().value();
    toks.push_back(tokens_for(i, kCases[i].context + kCases[i].n, nv));
    if (kCases[i].context > 0) {
      model::Batch b;
      b.add(seq, toks[i].data(), kCases[i].context, model::LogitsWanted::kNone);
      ASSERT_TRUE(md.forward(b, ws, *cache.value(), pool).ok());
    }
    step.add(seq, toks[i].data() + kCases[i].context, kCases[i].n, model::LogitsWanted::kAll);
  }
  ASSERT_TRUE(md.forward(step, ws, *cache.value(), pool).ok());
  for (size_t i = 0; i < std::size(kCases); ++i) {
    ASSERT_EQ(cache.value()->seq_len(step.slices[i].seq), kCases[i].context + kCases[i].n);
    const float* got = ws.slice_logits(i, nv);
    EXPECT_EQ(std::memcmp(got, alone[i].data(), alone[i].size() * sizeof(float)), 0)
        << "case " << i << " (context " << kCases[i].context << ", n " << kCases[i].n << ")";
  }
}

// Under the sanitizers two schemes: one float and one turbo page format.
std::vector<const char*> batch_schemes() {
  if (testing::kSanitized) return {"bf16", "turbo:k4v3"};
  return {"bf16", "8", "turbo:k8v3", "turbo:k4v3"};
}
INSTANTIATE_TEST_SUITE_P(Schemes, BatchForward, ::testing::ValuesIn(batch_schemes()));

TEST(BatchForwardErrors, BadBatchesAreRefusedBeforeAnyWork) {
  ASSERT_TRUE(testing::have(testing::smollm2_path())) << "run scripts/fetch-models";
  auto m = model::Model::load(testing::smollm2_path());
  ASSERT_TRUE(m.ok());
  kv::CacheOptions o;
  o.max_tokens = 128;
  o.budget_bytes = size_t{1} << 30;
  auto cache = kv::create_cache(m.value()->kv_shape(), o);
  ASSERT_TRUE(cache.ok());
  const int a = cache.value()->create_seq().value();
  ThreadPool pool(1);
  model::Workspace ws;
  const int32_t t[2] = {1, 2};
  model::Batch twice;
  twice.add(a, t, 1, model::LogitsWanted::kLast);
  twice.add(a, t + 1, 1, model::LogitsWanted::kLast);
  auto s = m.value()->forward(twice, ws, *cache.value(), pool);
  EXPECT_NE(s.message().find("names sequence"), std::string::npos) << s.message();
  model::Batch bad_token;
  const int32_t big = m.value()->config().n_vocab;
  bad_token.add(a, &big, 1, model::LogitsWanted::kLast);
  s = m.value()->forward(bad_token, ws, *cache.value(), pool);
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  EXPECT_EQ(cache.value()->seq_len(a), 0);  // nothing was written
  model::Batch empty;
  EXPECT_FALSE(m.value()->forward(empty, ws, *cache.value(), pool).ok());
}

}  // namespace
}  // namespace tkv
