// Continuous batching end to end on SmolLM2-135M through the public API:
// sequences batched together (mixed prefill chunks and decode tokens in one
// step) give the greedy tokens each gives alone; a pool too small for all of
// them preempts and still completes every request with the same tokens;
// cancellation mid-prefill and mid-decode frees every page; and a stress run of
// 64 requests with random lengths and cancellations ends with an empty pool.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <random>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;

std::vector<int32_t> run_alone(Engine& e, const Request& r) {
  auto c = e.generate(r);
  EXPECT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().finish, FinishReason::kLength) << c.value().error;
  return c.value().tokens;
}

// Submits all requests at once and collects each one's tokens.
std::vector<std::vector<int32_t>> run_together(Engine& e, const std::vector<Request>& reqs,
                                               std::vector<Timings>* timings = nullptr) {
  std::vector<RequestHandle> hs;
  for (const Request& r : reqs) {
    auto h = e.submit(r);
    EXPECT_TRUE(h.ok()) << h.status().message();
    hs.push_back(h.ok() ? h.value() : RequestHandle());
  }
  std::vector<std::vector<int32_t>> out(reqs.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    Event ev;
    while (hs[i].next(ev)) {
      if (ev.token >= 0) out[i].push_back(ev.token);
      if (ev.is_final()) {
        EXPECT_EQ(ev.finish, FinishReason::kLength) << i << ": " << ev.error;
        if (timings) timings->push_back(ev.timings);
      }
    }
  }
  return out;
}

TEST(Batching, MixedPrefillAndDecodeGiveEachSequencesAloneTokens) {
  TKV_REQUIRE_SMOLLM2();
  // A step of 128 tokens: the 511-token prompt is prefilled in chunks while the
  // short ones already decode beside it.
  auto eng = make_engine(smollm2_config(1024, 8, 128));
  ASSERT_TRUE(eng);
  const int64_t n_gen = kSanitized ? 4 : 12;
  std::vector<Request> reqs;
  int variant = 0;
  for (size_t len : {1, 63, 64, 65, 511})
    reqs.push_back(greedy(prompt_of(eng->tokenizer(), len, variant++), n_gen));
  std::vector<std::vector<int32_t>> alone;
  for (const Request& r : reqs) alone.push_back(run_alone(*eng, r));
  const auto steps_before =
      wait_stats(*eng, [](const EngineStats& s) { return s.running == 0; }).steps;
  const auto together = run_together(*eng, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(n_gen)) << i;
    EXPECT_EQ(together[i], alone[i]) << "prompt of " << reqs[i].prompt_tokens.size() << " tokens";
  }
  // Batched: far fewer steps than the five runs alone took (704 prompt tokens /
  // 128 per step, plus the decodes of all five side by side).
  const auto steps =
      wait_stats(*eng, [](const EngineStats& s) { return s.running == 0; }).steps - steps_before;
  EXPECT_LE(steps, 6 + n_gen + 2);
  EXPECT_EQ(eng->stats().kv_pages_used, 0);
}

TEST(Batching, PoolExhaustionPreemptsAndCompletesWithTheSameTokens) {
  TKV_REQUIRE_SMOLLM2();
  const int64_t ctx = 128, prompt = kSanitized ? 24 : 40, n_gen = kSanitized ? 40 : 60;
  EngineConfig c = smollm2_config(ctx, 4);
  c.page_size = 16;
  auto roomy = make_engine(c);
  ASSERT_TRUE(roomy);
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i)
    reqs.push_back(greedy(prompt_of(roomy->tokenizer(), static_cast<size_t>(prompt), i), n_gen));
  std::vector<std::vector<int32_t>> alone;
  for (const Request& r : reqs) alone.push_back(run_alone(*roomy, r));
  const size_t bytes_per_token = roomy->kv_info().bytes_per_token;
  roomy.reset();

  // A pool of 1.25 contexts: four sequences growing to prompt + n_gen tokens
  // cannot all stay resident.
  c.kv_budget_bytes = bytes_per_token * static_cast<size_t>(ctx * 5 / 4) + (size_t{1} << 16);
  auto tight = make_engine(c);
  ASSERT_TRUE(tight);
  ASSERT_EQ(tight->kv_info().pool_tokens, ctx * 5 / 4);
  std::vector<Timings> timings;
  const auto together = run_together(*tight, reqs, &timings);
  int64_t preemptions = 0;
  for (const Timings& t : timings) preemptions += t.preemptions;
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(wait_stats(*tight, [](const EngineStats& s) { return s.running == 0; }).preemptions,
            preemptions);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << i;
  const EngineStats s = tight->stats();
  EXPECT_EQ(s.kv_pages_used, 0);
  std::printf(
      "[preempt] 4 requests of %lld + %lld tokens in a pool of %lld: %lld preemptions, "
      "%lld steps\n",
      static_cast<long long>(prompt), static_cast<long long>(n_gen),
      static_cast<long long>(tight->kv_info().pool_tokens), static_cast<long long>(preemptions),
      static_cast<long long>(s.steps));
}

TEST(Batching, CancelMidPrefillAndMidDecodeFreesEveryPage) {
  TKV_REQUIRE_SMOLLM2();
  // Steps of 16 tokens: a 120-token prompt takes many steps to prefill.
  auto eng = make_engine(smollm2_config(128, 2, 16));
  ASSERT_TRUE(eng);
  const EngineStats start = eng->stats();
  ASSERT_EQ(start.kv_pages_used, 0);
  // The callback (engine thread) cancels through the handles; it waits on `mu`
  // until both are in place.
  std::mutex mu;
  RequestHandle prefilling, decoder;
  int decoded = 0;
  Request dec = greedy(prompt_of(eng->tokenizer(), 8), 100);
  dec.priority = 1;  // its decode runs every step beside the long prefill
  dec.on_token = [&](const Event& e) {
    if (e.token < 0) return;
    std::lock_guard<std::mutex> lk(mu);
    ++decoded;
    if (decoded == 2) prefilling.cancel();  // the long prompt is still being prefilled
    if (decoded == 6) decoder.cancel();     // itself, mid-decode
  };
  {
    std::lock_guard<std::mutex> lk(mu);
    auto hd = eng->submit(dec);
    ASSERT_TRUE(hd.ok());
    decoder = hd.value();
    auto hp = eng->submit(greedy(prompt_of(eng->tokenizer(), 120, 1), 10));
    ASSERT_TRUE(hp.ok());
    prefilling = hp.value();
  }
  const Event ep = prefilling.wait();
  const Event ed = decoder.wait();
  EXPECT_EQ(ep.finish, FinishReason::kCancelled);
  EXPECT_EQ(ed.finish, FinishReason::kCancelled);
  EXPECT_GT(ep.timings.prefill_tokens, 0);
  EXPECT_LT(ep.timings.prefill_tokens, 120);  // cancelled before its prompt was in
  EXPECT_GE(ed.timings.decode_tokens, 5);
  EXPECT_LT(ed.timings.decode_tokens, 99);
  const EngineStats end =
      wait_stats(*eng, [](const EngineStats& s) { return s.running + s.waiting == 0; });
  EXPECT_EQ(end.kv_pages_used, 0);
  EXPECT_EQ(end.kv_pages_free, start.kv_pages_free);
  // The cache itself is back to its start: two full contexts fit again at once.
  const auto full = run_together(*eng, {greedy(prompt_of(eng->tokenizer(), 120, 2), 8),
                                        greedy(prompt_of(eng->tokenizer(), 120, 3), 8)});
  EXPECT_EQ(full[0].size(), 8u);
  EXPECT_EQ(full[1].size(), 8u);
}

TEST(Batching, StressRandomLengthsAndCancellations) {
  TKV_REQUIRE_SMOLLM2();
  const int n_req = kSanitized ? 16 : 64;
  const int max_prompt = kSanitized ? 48 : 160, max_gen = kSanitized ? 8 : 24;
  auto eng = make_engine(smollm2_config(256, 16, 256));
  ASSERT_TRUE(eng);
  std::mt19937 rng(5);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestHandle> hs;
  std::vector<int64_t> want;
  for (int i = 0; i < n_req; ++i) {
    Request r = greedy(prompt_of(eng->tokenizer(), 1 + rng() % max_prompt, i),
                       1 + static_cast<int64_t>(rng() % max_gen));
    r.priority = static_cast<int>(rng() % 3);
    want.push_back(r.max_tokens);
    auto h = eng->submit(r);
    ASSERT_TRUE(h.ok()) << h.status().message();
    hs.push_back(h.value());
    if (rng() % 4 == 0) hs[rng() % hs.size()].cancel();  // anything submitted so far
  }
  int finished = 0, cancelled = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    if (rng() % 8 == 0) hs[i].cancel();
    int64_t n = 0;
    Event ev;
    FinishReason why = FinishReason::kNone;
    while (hs[i].next(ev)) {
      n += ev.token >= 0;
      if (ev.is_final()) why = ev.finish;
    }
    ASSERT_TRUE(why == FinishReason::kLength || why == FinishReason::kCancelled)
        << i << ": " << finish_reason_name(why) << " " << ev.error;
    if (why == FinishReason::kLength) {
      EXPECT_EQ(n, want[i]) << i;
      ++finished;
    } else {
      EXPECT_LE(n, want[i]) << i;
      ++cancelled;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(finished, 0);
  EXPECT_GT(cancelled, 0);
  if (!kSanitized) {
    EXPECT_LT(secs, 60.0);
  }
  const EngineStats s =
      wait_stats(*eng, [](const EngineStats& x) { return x.running + x.waiting == 0; });
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_EQ(s.kv_pages_used, 0);
  std::printf("[stress] %d requests (%d finished, %d cancelled) in %.1f s, %lld steps\n", n_req,
              finished, cancelled, secs, static_cast<long long>(s.steps));
}

}  // namespace
}  // namespace turbokv
