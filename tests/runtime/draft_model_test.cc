// The draft-model drafter's own cache on SmolLM2 drafting for itself: after a
// rejection (the target kept a token the draft did not propose) the draft KV
// holds exactly the kept tokens plus the new drafts: its rows for the kept
// tokens are byte-equal to those of a fresh drafter fed only those tokens (the
// K/V rows of a token do not depend on how the prefill was chunked), so no
// rejected draft stays behind; and the proposal then equals the fresh one's. With a
// probability floor the drafts stop early: a prefix of the unbounded ones, the cache
// holding every token drafted so far.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "runtime/spec/draft_model.h"
#include "tests/model/test_models.h"

namespace tkv::runtime::spec {
namespace {

TEST(DraftModelDrafter, RejectedDraftsLeaveTheDraftCache) {
  if (!testing::have(testing::smollm2_path())) GTEST_SKIP() << "SmolLM2 not fetched";
  auto target = model::Model::load(testing::smollm2_path());
  ASSERT_TRUE(target.ok());
  auto tok = tok::Tokenizer::from_gguf(target.value()->gguf());
  ASSERT_TRUE(tok.ok());
  ThreadPool pool(2);
  for (const char* scheme : {"turbo", "bf16"}) {
    auto dm = DraftModel::load(testing::smollm2_path(), *tok.value(),
                               kv::parse_kv_quant(scheme).value(), 0, 256, 3, &pool);
    ASSERT_TRUE(dm.ok()) << dm.status().message();
    const std::vector<int32_t> a =
        tok.value()->encode("The river ran past the old mill", true, false);
    DraftModelDrafter d1(dm.value().get(), 0.0);  // no floor: always 4 drafts
    const auto p1 = d1.propose(a, 4);
    ASSERT_EQ(p1.size(), 4u);
    kv::KvCache& cache = dm.value()->cache();
    EXPECT_EQ(cache.seq_len(d1.kv_seq()), static_cast<int64_t>(a.size()) + 3);

    // The target rejected p1[0] and kept another token x instead.
    std::vector<int32_t> b = a;
    b.push_back((p1[0] + 1) % tok.value()->n_vocab());
    const auto p2 = d1.propose(b, 4);
    DraftModelDrafter d2(dm.value().get(), 0.0);
    const auto q2 = d2.propose(b, 4);
    EXPECT_EQ(p2, q2) << scheme;
    EXPECT_EQ(cache.seq_len(d1.kv_seq()), static_cast<int64_t>(b.size()) + 3);
    std::vector<std::vector<uint8_t>> got, want;
    const auto n = static_cast<int64_t>(b.size());
    ASSERT_TRUE(cache.export_seq(d1.kv_seq(), n, &got).ok());
    ASSERT_TRUE(cache.export_seq(d2.kv_seq(), n, &want).ok());
    EXPECT_TRUE(got == want) << scheme << ": the draft KV of the kept tokens differs";

    // Probability floors: the drafts stop early, a prefix of the unbounded ones, the
    // cache holding every token drafted so far; a higher floor never drafts more.
    size_t last = 4;
    for (const double floor : {0.05, 0.2, 0.4, 0.6, 0.8, 0.95}) {
      DraftModelDrafter d3(dm.value().get(), floor);
      const auto p3 = d3.propose(a, 4);
      ASSERT_GE(d3.kv_seq(), 0);
      ASSERT_LE(p3.size(), last) << scheme << " floor " << floor;
      last = p3.size();
      EXPECT_TRUE(std::equal(p3.begin(), p3.end(), p1.begin())) << scheme;
      EXPECT_EQ(cache.seq_len(d3.kv_seq()),
                static_cast<int64_t>(a.size() + p3.size()) - (p3.size() == 4 ? 1 : 0));
      std::printf("[draft] %s: %zu of 4 drafts clear a %.2f floor\n", scheme, p3.size(), floor);
    }
  }
}

}  // namespace
}  // namespace tkv::runtime::spec
