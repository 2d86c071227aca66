// The disk prompt cache through the public API on SmolLM2-135M: an engine
// started after another one served a prompt loads that prompt's full KV pages
// from the directory instead of prefilling them, and generates the same greedy
// tokens; a prompt sharing only its first pages loads those; another scheme in
// the same directory never sees them; a corrupt block is refused and
// recomputed, never served.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/api/api_test_util.h"

namespace turbokv {
namespace {
using namespace turbokv::testing;
namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("tkv_api_pc_" + std::to_string(::getpid()));
  Dir() { fs::remove_all(path); }
  ~Dir() { fs::remove_all(path); }
  int blocks() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(path)) n += e.path().extension() == ".tkvb";
    return n;
  }
};

Completion run(const EngineConfig& cfg, const std::vector<int32_t>& prompt, EngineStats* st) {
  auto e = make_engine(cfg);
  EXPECT_TRUE(e);
  if (!e) return {};
  auto c = e->generate(greedy(prompt, kSanitized ? 4 : 12));
  EXPECT_TRUE(c.ok()) << c.status().message();
  *st = e->stats();
  return c.ok() ? c.value() : Completion{};
}  // the engine's destructor finishes the queued block writes

TEST(PromptCache, RestartedEngineLoadsThePagesInsteadOfPrefilling) {
  TKV_REQUIRE_SMOLLM2();
  Dir dir;
  EngineConfig cfg = smollm2_config(1024, 2);
  cfg.kv = KvConfig::parse("turbo").value();
  auto probe = make_engine(cfg);
  ASSERT_TRUE(probe);
  const int64_t n = kSanitized ? 200 : 300;
  const auto p = prompt_of(probe->tokenizer(), static_cast<size_t>(n));
  // The first 150 tokens of p, then other text: its first two pages are p's.
  auto q = std::vector<int32_t>(p.begin(), p.begin() + 150);
  const auto tail = prompt_of(probe->tokenizer(), 100, 7);
  q.insert(q.end(), tail.begin() + 1, tail.end());
  probe.reset();
  const int64_t full = (n - 1) / 64 * 64;  // whole pages below the last prompt token

  EngineStats st;
  const Completion cold = run(cfg, p, &st);  // no cache: the reference
  cfg.prompt_cache_dir = dir.path.string();
  const Completion first = run(cfg, p, &st);
  EXPECT_EQ(first.timings.cached_tokens, 0);
  EXPECT_EQ(first.tokens, cold.tokens);
  EXPECT_GT(st.prompt_cache_bytes + dir.blocks(), 0);
  const int written = dir.blocks();
  EXPECT_EQ(written, (n + (kSanitized ? 4 : 12) - 1) / 64);  // the KV's full pages

  const Completion again = run(cfg, p, &st);  // a new engine: only the directory holds them
  EXPECT_EQ(again.timings.cached_tokens, full);
  EXPECT_EQ(again.timings.prefill_tokens, n - full);
  EXPECT_EQ(again.tokens, cold.tokens);
  EXPECT_EQ(st.prompt_cache_hits, 1);
  EXPECT_EQ(st.prompt_cache_tokens, full);
  EXPECT_EQ(st.prompt_cache_skipped, 0);

  // Only the first two pages in common: those two are loaded.
  EngineConfig no_cache = cfg;
  no_cache.prompt_cache_dir.clear();
  const Completion q_cold = run(no_cache, q, &st);
  const Completion q_hit = run(cfg, q, &st);
  EXPECT_EQ(q_hit.timings.cached_tokens, 128);
  EXPECT_EQ(q_hit.tokens, q_cold.tokens);

  // Another scheme in the same directory: its own namespace, nothing shared.
  EngineConfig bf = cfg;
  bf.kv = KvConfig::parse("bf16").value();
  const int before = dir.blocks();
  const Completion b1 = run(bf, p, &st);
  EXPECT_EQ(b1.timings.cached_tokens, 0);
  EXPECT_EQ(st.prompt_cache_skipped, 0);
  EXPECT_GT(dir.blocks(), before);

  // Every block damaged: refused (and removed), recomputed, the same tokens.
  for (const auto& e : fs::directory_iterator(dir.path)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  const Completion bad = run(cfg, p, &st);
  EXPECT_EQ(bad.timings.cached_tokens, 0);
  EXPECT_EQ(st.prompt_cache_hits, 0);
  EXPECT_EQ(st.prompt_cache_skipped, 1);  // block 0: the run stops there
  EXPECT_EQ(bad.tokens, cold.tokens);
}

}  // namespace
}  // namespace turbokv
