// The continuous-batching scheduler on its own (no model): a small simulator
// runs its plans (every chunk "computes", a completing chunk samples a token)
// and checks after every step that the page ledger matches the tokens in the
// KV, the step fits its token budget, and the running set fits its slots.
// With drafts on, every decode is offered random drafts, of which a random
// number is kept (the rest rolled back), as speculative decoding does.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "runtime/scheduler.h"

namespace tkv::runtime {
namespace {

struct Sim {
  explicit Sim(SchedulerConfig c) : s(c) {}
  struct Req {
    int64_t max_tokens = 0, generated = 0;
    int64_t admitted_step = -1, finished_step = -1;
  };
  Scheduler s;
  std::map<SeqId, Req> reqs;
  std::vector<SeqId> admit_order;
  int64_t steps = 0;
  SeqId next = 0;
  std::mt19937* drafts = nullptr;  // offers and acceptances when set
  int64_t drafted = 0, rolled_back = 0;

  SeqId add(int64_t prompt, int64_t max_tokens, int priority = 0, ChunkRule rule = {}) {
    const SeqId id = next++;
    s.add(id, priority, prompt, rule);
    reqs[id].max_tokens = max_tokens;
    return id;
  }
  bool live(SeqId id) const { return s.contains(id); }

  StepPlan step() {
    StepPlan p = s.plan();
    ++steps;
    EXPECT_LE(p.n_tokens(), s.config().step_tokens);
    EXPECT_LE(s.n_running(), s.config().max_running);
    EXPECT_LE(s.used_pages(), s.config().total_pages);
    for (SeqId id : p.admitted) {
      admit_order.push_back(id);
      if (reqs[id].admitted_step < 0) reqs[id].admitted_step = steps;
    }
    s.done(p);
    for (const PlannedChunk& c : p.chunks) {
      if (!c.completes) continue;
      Req& r = reqs[c.id];
      const int64_t kept = c.n_draft > 0 ? static_cast<int64_t>((*drafts)() % (c.n_draft + 1)) : 0;
      drafted += c.n_draft;
      if (kept < c.n_draft) s.rollback(c.id, c.n_draft - kept);
      rolled_back += c.n_draft - kept;
      r.generated += kept + 1;  // the kept drafts and the bonus token
      if (r.generated >= r.max_tokens) {
        s.finish(c.id);
        r.finished_step = steps;
        continue;
      }
      for (int64_t i = 0; i <= kept; ++i) s.append(c.id);
      // As the engine does: no more drafts than the tokens still wanted, bonus aside.
      if (drafts)
        s.set_draft(c.id, std::min<int64_t>((*drafts)() % 7, r.max_tokens - r.generated - 1));
    }
    // The ledger holds exactly the pages of the tokens in the KV.
    int64_t pages = 0;
    for (const auto& [id, r] : reqs)
      if (live(id)) pages += s.pages_for(s.n_computed(id));
    EXPECT_EQ(pages, s.used_pages()) << "step " << steps;
    return p;
  }
  void run_until_empty(int64_t max_steps = 100000) {
    while (!s.empty() && steps < max_steps) step();
    ASSERT_TRUE(s.empty()) << "not done after " << max_steps << " steps";
    EXPECT_EQ(s.used_pages(), 0);
  }
};

SchedulerConfig cfg(int64_t pages, int page, int running, int64_t step, int64_t ctx) {
  SchedulerConfig c;
  c.total_pages = pages;
  c.page_size = page;
  c.max_running = running;
  c.step_tokens = step;
  c.max_seq_tokens = ctx;
  return c;
}

TEST(Scheduler, ChunkedPrefillThenDecode) {
  Sim sim(cfg(100, 16, 4, 256, 1024));
  const SeqId a = sim.add(1000, 3);
  std::vector<int64_t> sizes;
  while (sim.live(a)) {
    const StepPlan p = sim.step();
    ASSERT_EQ(p.chunks.size(), 1u);
    sizes.push_back(p.chunks[0].n);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{256, 256, 256, 232, 1, 1}));
  EXPECT_EQ(sim.s.used_pages(), 0);
}

// A scoring pass (Engine::score with logits_from / tokens_per_step): one chunk
// ends at split_at, later ones hold at most max_after tokens, and the budget
// still caps every chunk.
TEST(Scheduler, ChunkRuleSplitsThenCapsEachStep) {
  Sim sim(cfg(100, 16, 4, 256, 1024));
  const SeqId a = sim.add(530, 1, 0, ChunkRule{300, 100});
  std::vector<int64_t> firsts, sizes;
  while (sim.live(a)) {
    const StepPlan p = sim.step();
    ASSERT_EQ(p.chunks.size(), 1u);
    firsts.push_back(p.chunks[0].first);
    sizes.push_back(p.chunks[0].n);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{256, 44, 100, 100, 30}));
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 256, 300, 400, 500}));

  // One token a step from split_at on (the decode path), beside a plain request
  // whose prefill takes what the budget leaves.
  Sim one(cfg(100, 16, 4, 64, 1024));
  const SeqId b = one.add(20, 1, 0, ChunkRule{16, 1});
  const SeqId c = one.add(200, 1);
  std::vector<int64_t> b_sizes;
  while (one.live(b)) {
    const StepPlan p = one.step();
    for (const PlannedChunk& ch : p.chunks)
      if (ch.id == b) b_sizes.push_back(ch.n);
  }
  EXPECT_EQ(b_sizes, (std::vector<int64_t>{16, 1, 1, 1, 1}));
  one.run_until_empty();
  EXPECT_FALSE(one.live(c));
}

TEST(Scheduler, DecodesFirstThenPrefillUnderTheBudget) {
  Sim sim(cfg(1000, 16, 8, 64, 4096));
  for (int i = 0; i < 3; ++i) sim.add(10, 100);
  sim.step();  // the three prompts
  const SeqId big = sim.add(500, 1);
  const StepPlan p = sim.step();
  ASSERT_EQ(p.chunks.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.chunks[static_cast<size_t>(i)].n, 1);
  EXPECT_EQ(p.chunks[3].id, big);
  EXPECT_EQ(p.chunks[3].n, 64 - 3);  // what the decodes left of the budget
  EXPECT_FALSE(p.chunks[3].completes);
}

TEST(Scheduler, PrioritiesThenFirstComeFirstServed) {
  Sim sim(cfg(1000, 16, 1, 64, 4096));
  const SeqId low1 = sim.add(5, 2, 0);
  const SeqId high = sim.add(5, 2, 5);
  const SeqId low2 = sim.add(5, 2, 0);
  sim.step();                          // high runs
  const SeqId mid = sim.add(5, 2, 1);  // arrives later, outranks both lows
  sim.run_until_empty();
  EXPECT_EQ(sim.admit_order, (std::vector<SeqId>{high, mid, low1, low2}));
}

TEST(Scheduler, LongRequestIsNotStarvedByAStreamOfShortOnes) {
  // 640 tokens of KV: the long request (prompt 400) needs most of the pool, so it
  // waits for running short ones to drain; short ones that come after it must not
  // be admitted before it, or it would wait forever.
  Sim sim(cfg(40, 16, 8, 128, 512));
  for (int i = 0; i < 6; ++i) sim.add(30, 20);
  sim.step();
  sim.step();
  const SeqId longr = sim.add(400, 10);
  std::vector<SeqId> later;
  for (int t = 0; t < 300 && sim.live(longr); ++t) {
    later.push_back(sim.add(30, 20));
    later.push_back(sim.add(20, 5));
    sim.step();
  }
  ASSERT_FALSE(sim.live(longr)) << "long request still waiting after 300 steps";
  // It ran as soon as the six earlier requests finished (~20 decode steps), and
  // the short requests behind it in line got in only afterwards.
  EXPECT_LE(sim.reqs[longr].finished_step, 45);
  for (SeqId id : later) {
    if (sim.reqs[id].admitted_step >= 0) {
      EXPECT_GE(sim.reqs[id].admitted_step, sim.reqs[longr].admitted_step) << id;
    }
  }
  sim.run_until_empty();
}

TEST(Scheduler, PoolExhaustionPreemptsTheNewestWhichFinishesLater) {
  // 8 pages of 16 tokens; two sequences that each grow to 100 tokens cannot both fit.
  Sim sim(cfg(8, 16, 4, 64, 128));
  const SeqId old = sim.add(20, 80);
  const SeqId young = sim.add(20, 80);
  bool preempted = false;
  while (!sim.s.empty()) {
    const StepPlan p = sim.step();
    for (SeqId id : p.preempted) {
      EXPECT_EQ(id, young);
      EXPECT_EQ(sim.s.n_computed(young), 0);
      preempted = true;
    }
    if (!p.preempted.empty()) {  // the old one kept its decode in the same step
      ASSERT_EQ(p.chunks.size(), 1u);
      EXPECT_EQ(p.chunks[0].id, old);
    }
    ASSERT_LT(sim.steps, 1000);
  }
  EXPECT_TRUE(preempted);
  EXPECT_EQ(sim.s.n_preemptions(), 1);
  EXPECT_EQ(sim.reqs[old].generated, 80);
  EXPECT_EQ(sim.reqs[young].generated, 80);  // recomputed, then completed
  EXPECT_LT(sim.reqs[old].finished_step, sim.reqs[young].finished_step);
  EXPECT_EQ(sim.s.used_pages(), 0);
}

TEST(Scheduler, RecomputeReprefillsPromptAndGeneratedTokens) {
  Sim sim(cfg(8, 16, 4, 256, 128));
  sim.add(20, 80);
  const SeqId young = sim.add(20, 80);
  int64_t generated_at_preempt = -1;
  while (sim.live(young)) {
    const StepPlan p = sim.step();
    if (!p.preempted.empty()) generated_at_preempt = sim.reqs[young].generated;
    for (const PlannedChunk& c : p.chunks)
      if (c.id == young && generated_at_preempt >= 0 && c.first == 0) {
        // The whole known sequence in one chunk: prompt + what it had generated.
        EXPECT_EQ(c.n, 20 + generated_at_preempt);
        EXPECT_TRUE(c.completes);
      }
  }
  EXPECT_GT(generated_at_preempt, 0);
}

TEST(Scheduler, CancellationFreesEveryPage) {
  Sim sim(cfg(64, 16, 4, 32, 1024));
  const SeqId decoding = sim.add(10, 1000);
  sim.step();
  const SeqId prefilling = sim.add(300, 10);
  sim.step();
  const SeqId waiting = sim.add(50, 10);  // submitted, not admitted yet
  ASSERT_GT(sim.s.n_computed(prefilling), 0);
  ASSERT_GT(sim.s.used_pages(), 0);
  for (SeqId id : {decoding, prefilling, waiting}) sim.s.cancel(id);
  const StepPlan p = sim.step();
  EXPECT_EQ(p.dropped.size(), 3u);
  EXPECT_TRUE(p.chunks.empty());
  EXPECT_TRUE(sim.s.empty());
  EXPECT_EQ(sim.s.used_pages(), 0);
  EXPECT_EQ(sim.s.free_pages(), 64);
}

TEST(Scheduler, RandomLoadKeepsTheLedgerAndFinishesEverything) {
  std::mt19937 rng(11);
  Sim sim(cfg(48, 16, 6, 96, 256));
  std::vector<SeqId> ids;
  for (int t = 0; t < 400; ++t) {
    if (rng() % 3 == 0) {
      const int64_t prompt = 1 + static_cast<int64_t>(rng() % 200);
      const int64_t room = 256 - prompt + 1;
      ids.push_back(sim.add(prompt, 1 + static_cast<int64_t>(rng() % std::min<int64_t>(room, 60)),
                            static_cast<int>(rng() % 3)));
    }
    if (!ids.empty() && rng() % 7 == 0) sim.s.cancel(ids[rng() % ids.size()]);
    sim.step();
  }
  sim.run_until_empty();
  for (SeqId id : ids) {
    const Sim::Req& r = sim.reqs[id];
    if (r.finished_step >= 0) {
      EXPECT_EQ(r.generated, r.max_tokens);
    }
  }
}

TEST(Scheduler, RandomLoadWithDraftsKeepsTheLedgerAndFinishesEverything) {
  std::mt19937 rng(12), draft_rng(13);
  Sim sim(cfg(48, 16, 6, 96, 256));
  sim.drafts = &draft_rng;
  std::vector<SeqId> ids;
  for (int t = 0; t < 400; ++t) {
    if (rng() % 3 == 0) {
      const int64_t prompt = 1 + static_cast<int64_t>(rng() % 200);
      const int64_t room = 256 - prompt + 1;
      ids.push_back(sim.add(prompt, 1 + static_cast<int64_t>(rng() % std::min<int64_t>(room, 60)),
                            static_cast<int>(rng() % 3)));
    }
    if (!ids.empty() && rng() % 7 == 0) sim.s.cancel(ids[rng() % ids.size()]);
    sim.step();
  }
  sim.run_until_empty();
  EXPECT_GT(sim.drafted, 100);  // not vacuous: drafts rode along and were rolled back
  EXPECT_GT(sim.rolled_back, 0);
  for (SeqId id : ids) {
    const Sim::Req& r = sim.reqs[id];
    if (r.finished_step >= 0) {
      EXPECT_EQ(r.generated, r.max_tokens);
    }
  }
}

}  // namespace
}  // namespace tkv::runtime
