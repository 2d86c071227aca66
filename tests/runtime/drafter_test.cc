// Prompt-lookup drafter: longest suffix first, most recent occurrence, at most
// max_k tokens, nothing without a match; option ranges. The scheduler's side of
// speculation: drafts ride on a decode within budget, context and pages, and a
// rollback returns the rejected drafts' pages.
#include <gtest/gtest.h>

#include "runtime/scheduler.h"
#include "runtime/spec/drafter.h"

namespace tkv::runtime {
namespace {
using spec::NgramDrafter;

TEST(NgramDrafter, ContinuesTheMostRecentLongestMatch) {
  NgramDrafter d(3, 1);
  // Suffix [1 2 3] occurs at 0 (followed by 4 5) and at 6 (followed by 9 9):
  // the most recent one wins.
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 7, 1, 2, 3, 9, 9, 8, 1, 2, 3};
  EXPECT_EQ(d.propose(t, 2), (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(d.propose(t, 8), (std::vector<int32_t>{9, 9, 8, 1, 2, 3}));  // up to the end
}

TEST(NgramDrafter, LongerSuffixBeatsAMoreRecentShorterOne) {
  NgramDrafter d(3, 1);
  // [5 6 7] matches at 0 (-> 1); the 1-gram [7] also matches later (-> 2).
  const std::vector<int32_t> t = {5, 6, 7, 1, 7, 2, 5, 6, 7};
  EXPECT_EQ(d.propose(t, 1), (std::vector<int32_t>{1}));
  NgramDrafter one(1, 1);
  EXPECT_EQ(one.propose(t, 1), (std::vector<int32_t>{2}));
}

TEST(NgramDrafter, NoMatchNoDraft) {
  NgramDrafter d(3, 2);
  EXPECT_TRUE(d.propose({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(d.propose({1, 2, 1}, 4).empty());  // only a 1-gram repeats; min is 2
  EXPECT_TRUE(d.propose({7}, 4).empty());
}

TEST(SpecOptions, RangesAreChecked) {
  spec::SpecOptions o;
  o.kind = spec::Kind::kNgram;
  EXPECT_TRUE(spec::validate(o).ok());
  o.max_draft = 0;
  EXPECT_NE(spec::validate(o).message().find("max draft 0"), std::string::npos);
  o.max_draft = 4;
  o.ngram_min = 4;  // above ngram_max = 3
  EXPECT_FALSE(spec::validate(o).ok());
  o.kind = spec::Kind::kNone;  // off: nothing else matters
  EXPECT_TRUE(spec::validate(o).ok());
}

SchedulerConfig small_pool(int64_t pages, int64_t step_tokens = 64) {
  SchedulerConfig c;
  c.total_pages = pages;
  c.page_size = 4;
  c.max_running = 2;
  c.step_tokens = step_tokens;
  c.max_seq_tokens = 64;
  return c;
}

// Prefills a 3-token prompt and samples one token: the next plan is a decode.
void to_decode(Scheduler& s, SeqId id) {
  s.add(id, 0, 3);
  const StepPlan p = s.plan();
  s.done(p);
  s.append(id);
}

TEST(SchedulerDrafts, RideOnTheDecodeAndRollBack) {
  Scheduler s(small_pool(16));
  to_decode(s, 0);
  s.set_draft(0, 6);
  const StepPlan p = s.plan();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 3);
  EXPECT_EQ(p.chunks[0].n, 7);
  EXPECT_EQ(p.chunks[0].n_draft, 6);
  EXPECT_EQ(s.used_pages(), 3);  // 10 tokens
  s.done(p);
  s.rollback(0, 4);  // 2 of 6 drafts kept: 6 tokens in the KV
  EXPECT_EQ(s.n_computed(0), 6);
  EXPECT_EQ(s.used_pages(), 2);
  for (int i = 0; i < 3; ++i) s.append(0);  // the 2 kept drafts + the bonus token
  const StepPlan q = s.plan();              // offers expire: a plain decode
  ASSERT_EQ(q.chunks.size(), 1u);
  EXPECT_EQ(q.chunks[0].first, 6);
  EXPECT_EQ(q.chunks[0].n, 1);
  EXPECT_EQ(q.chunks[0].n_draft, 0);
}

TEST(SchedulerDrafts, ShortOfPagesBudgetOrContextTheyShrinkNeverPreempt) {
  Scheduler s(small_pool(3));  // 12 tokens
  to_decode(s, 0);
  s.set_draft(0, 20);
  StepPlan p = s.plan();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_EQ(p.chunks[0].n_draft, 8);  // 3 + 1 + 8 = 12 tokens: all pages
  EXPECT_EQ(s.free_pages(), 0);
  s.done(p);
  s.rollback(0, 8);

  Scheduler b(small_pool(16, 5));  // a step of 5 tokens: the decode's own + 4
  to_decode(b, 0);
  b.set_draft(0, 20);
  EXPECT_EQ(b.plan().chunks[0].n_draft, 4);

  SchedulerConfig c = small_pool(64);
  c.max_seq_tokens = 6;  // the context: 3 + 1 + 2
  Scheduler x(c);
  to_decode(x, 0);
  x.set_draft(0, 20);
  EXPECT_EQ(x.plan().chunks[0].n_draft, 2);
}

TEST(SchedulerDrafts, TakeOnlyWhatAnAdmissionLeaves) {
  Scheduler s(small_pool(4));  // 16 tokens
  to_decode(s, 0);             // 1 page
  s.add(1, 0, 7);              // needs 2 pages
  s.set_draft(0, 20);
  const StepPlan p = s.plan();
  ASSERT_EQ(p.admitted, std::vector<SeqId>{1});
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].n_draft, 4);  // the one page left: tokens 4 to 7
  EXPECT_EQ(s.free_pages(), 0);
  s.done(p);
  s.rollback(0, 4);
  EXPECT_EQ(s.free_pages(), 1);
  s.append(0);
  s.append(1);
  EXPECT_EQ(s.plan().chunks[0].n_draft, 0);  // the offer expired with its plan
}

}  // namespace
}  // namespace tkv::runtime
