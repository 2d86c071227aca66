// turbokv's logits vs llama.cpp's on the same GGUF and tokens (first 512
// wikitext tokens, fixtures in tests/fixtures/logits), measured beside
// llama.cpp's own disagreement between its flash-attention and plain attention
// paths (the *.fa-off.bin fixtures) — the noise floor of "the same model".
#include <algorithm>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "tests/model/logits_fixture.h"
#include "tests/model/test_models.h"

namespace tkv {
namespace {

// Log-probability source for a position: our full logits, or another fixture's top-k.
using LogProbFn = std::function<bool(uint32_t pos, int32_t id, double* lp)>;

struct Agreement {
  double top1 = 0, mean_kl = 0, max_kl = 0;
  int n = 0;
};

// KL(ref || cand) over ref's top-32 tokens plus one lumped tail bucket, and top-1
// agreement. The same estimator is applied to turbokv and to llama.cpp's other
// attention path, so the two numbers compare like for like.
Agreement agree(const testing::LogitsFixture& ref, const std::vector<int32_t>& cand_top1,
                const LogProbFn& cand) {
  constexpr uint32_t kTop = 32;
  Agreement a;
  for (uint32_t i = 0; i < ref.n_pos; ++i) {
    a.top1 += cand_top1[i] == ref.top_id[size_t{i} * ref.k];
    double kl = 0, mr = 0, mc = 0;
    bool ok = true;
    for (uint32_t j = 0; j < kTop && ok; ++j) {
      const int32_t id = ref.top_id[size_t{i} * ref.k + j];
      const double lr = ref.top_logit[size_t{i} * ref.k + j] - ref.lse[i];
      double lc;
      ok = cand(i, id, &lc);
      kl += std::exp(lr) * (lr - lc);
      mr += std::exp(lr);
      mc += std::exp(lc);
    }
    if (!ok) continue;
    const double tr = std::max(1e-12, 1 - mr), tc = std::max(1e-12, 1 - mc);
    kl += tr * std::log(tr / tc);
    a.mean_kl += kl;
    a.max_kl = std::max(a.max_kl, kl);
    ++a.n;
  }
  a.top1 /= ref.n_pos;
  a.mean_kl /= std::max(1, a.n);
  return a;
}

void check(const std::string& model, const std::string& name, const std::string& kv) {
  if (!testing::have(model)) GTEST_SKIP() << model << " not fetched (scripts/fetch-models)";
  const std::string dir = std::string(TKV_SOURCE_DIR) + "/tests/fixtures/logits/";
  testing::LogitsFixture ref, alt;
  ASSERT_TRUE(testing::read_logits_fixture(dir + name + ".bin", &ref));
  ASSERT_TRUE(testing::read_logits_fixture(dir + name + ".fa-off.bin", &alt));
  ASSERT_EQ(ref.ids, alt.ids);

  runtime::EngineOptions o;
  o.model_path = model;
  o.n_threads = 2;
  o.cache.max_tokens = ref.n_pos + 64;
  o.cache.scheme = kv::parse_kv_quant(kv).value();
  auto eng = runtime::Engine::create(o);
  ASSERT_TRUE(eng.ok()) << eng.status().message();
  auto& e = *eng.value();
  ASSERT_EQ(static_cast<uint32_t>(e.model().config().n_vocab), ref.n_vocab);
  auto seq = e.cache().create_seq();
  std::vector<float> logits;
  Status st = e.prefill(seq.value(), ref.ids, &logits, /*all_logits=*/true);
  ASSERT_TRUE(st.ok()) << st.message();

  const size_t nv = ref.n_vocab;
  std::vector<double> lse(ref.n_pos);
  std::vector<int32_t> ours_top1(ref.n_pos), alt_top1(ref.n_pos);
  double nll_ref = 0, nll_ours = 0;
  int n_scored = 0;
  for (uint32_t i = 0; i < ref.n_pos; ++i) {
    const float* l = logits.data() + i * nv;
    for (size_t v = 0; v < nv; ++v) ASSERT_TRUE(std::isfinite(l[v])) << "pos " << i << " id " << v;
    const size_t am = static_cast<size_t>(std::max_element(l, l + nv) - l);
    double s = 0;
    for (size_t v = 0; v < nv; ++v) s += std::exp(double(l[v]) - l[am]);
    lse[i] = l[am] + std::log(s);
    ours_top1[i] = static_cast<int32_t>(am);
    alt_top1[i] = alt.top_id[size_t{i} * alt.k];
    if (i >= ref.n_pos / 2 &&
        i + 1 < ref.n_pos) {  // llama-perplexity scores the second half of a chunk
      nll_ref += ref.lse[i] - ref.next_logit[i];
      nll_ours += lse[i] - l[ref.ids[i + 1]];
      ++n_scored;
    }
  }
  const Agreement ours = agree(ref, ours_top1, [&](uint32_t i, int32_t id, double* lp) {
    *lp = logits[i * nv + static_cast<size_t>(id)] - lse[i];
    return true;
  });
  const Agreement floor = agree(ref, alt_top1, [&](uint32_t i, int32_t id, double* lp) {
    for (uint32_t j = 0; j < alt.k; ++j)
      if (alt.top_id[size_t{i} * alt.k + j] == id)
        return *lp = alt.top_logit[size_t{i} * alt.k + j] - alt.lse[i], true;
    return false;
  });
  const double ppl_ref = std::exp(nll_ref / n_scored), ppl_ours = std::exp(nll_ours / n_scored);
  std::printf(
      "[parity] %s, %s KV, vs llama.cpp (flash-attn on, f16 KV): turbokv top1 %.4f KL %.3g (max "
      "%.3g) | llama.cpp flash-attn off: "
      "top1 %.4f KL %.3g | chunk-0 ppl llama.cpp %.4f turbokv %.4f\n",
      name.c_str(), kv.c_str(), ours.top1, ours.mean_kl, ours.max_kl, floor.top1, floor.mean_kl,
      ppl_ref, ppl_ours);
  // Targets: the top-1 >= 99 % and KL <= 1e-3, relaxed to llama.cpp's own
  // noise floor (its two attention paths disagree by more than that on these
  // Q4 models): within 25 % (+2e-4) of the floor's KL and 2 points of its top-1.
  EXPECT_LE(ours.mean_kl, std::max(1e-3, 1.25 * floor.mean_kl + 2e-4));
  EXPECT_GE(ours.top1, std::min(0.99, floor.top1 - 0.02));
}

// bf16 KV (the default) and f16 KV (llama.cpp's KV type in the fixtures).
TEST(LogitsParity, SmolLM2) {
  for (const char* kv : {"bf16", "f16"}) check(testing::smollm2_path(), "smollm2-135m", kv);
}
TEST(LogitsParity, Gemma3) {
  for (const char* kv : {"bf16", "f16"}) check(testing::gemma3_path(), "gemma3-270m", kv);
}
TEST(LogitsParity, Qwen25) {
  for (const char* kv : {"bf16", "f16"}) check(testing::qwen15_path(), "qwen2.5-1.5b", kv);
}

}  // namespace
}  // namespace tkv
