// End to end through the engine (SmolLM2-135M-Instruct Q4_1, skipped when the
// model file is missing). Comparisons are teacher-forced on one token sequence
// (prompt + a bf16 greedy continuation), so a near-tie flipping one greedy
// token cannot derail the rest of the run (the one greedy test stops at the
// first divergence and checks it was a near-tie): fp32 summation order differs
// between the AVX2 and AVX-512 kernels and this small Q4_1 model turns that
// into logit differences of ~1 on a few tokens, which made exact greedy-equality
// tests pass on one ISA and fail on the other. What is checked instead:
//  - mean KL(reference || candidate) of next-token distributions,
//  - top-1 equality at every position where the reference's top-1 margin is
//    wide (>= kMargin logits), i.e. where no legitimate rounding could flip it.
// Bad --kv-quant values are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "eval/kl.h"
#include "runtime/engine.h"
#include "tests/sanitized.h"

namespace tkv {
namespace {

std::string model_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/turbokv/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<runtime::Engine> engine(const std::string& scheme,
                                        ops::AttnMode path = ops::AttnMode::kFused,
                                        int64_t quant_start = 0) {
  runtime::EngineOptions o;
  o.model_path = model_path();
  o.n_threads = 2;
  o.cache.scheme = kv::parse_kv_quant(scheme).value();
  o.attn = path;
  o.cache.quant_start = quant_start;
  o.cache.max_tokens = 512;
  o.cache.max_seqs = 2;
  auto e = runtime::Engine::create(o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<int32_t> prompt_tokens(runtime::Engine& e) {
  auto text = e.tokenizer().apply_chat_template(
      {{"user", "Explain in two sentences why the sky is blue during the day."}}, true);
  EXPECT_TRUE(text.ok());
  return e.tokenizer().encode(text.value(), false, true);
}

std::vector<int32_t> greedy(runtime::Engine& e, const std::vector<int32_t>& prompt, int n) {
  sampling::SamplerParams sp;
  sp.temperature = 0.0f;
  std::vector<int32_t> out;
  auto seq = e.cache().create_seq();
  EXPECT_TRUE(seq.ok());
  auto st = e.generate(*seq, prompt, n, sp, [&](int32_t t, const std::string&) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.status().message();
  e.cache().free_seq(*seq);
  return out;
}

struct Closeness {
  double mean_kl = 0;    // mean KL(ref || got) over the scored positions
  int wide = 0;          // positions whose reference top-1 margin >= kMargin
  int wide_agree = 0;    // ... of which the candidate's top-1 matches
  int agree = 0, n = 0;  // top-1 agreement over all scored positions
};

// Wider than twice the largest teacher-forced logit drift seen between two
// correct runs (1.43), so a flip at such a position is a real error.
constexpr double kMargin = 3.0;

// argmax of one logit row, and its lead over the runner-up.
int64_t top1(const float* p, int64_t nv, float* margin) {
  const int64_t t = std::max_element(p, p + nv) - p;
  float second = -INFINITY;
  for (int64_t i = 0; i < nv; ++i)
    if (i != t) second = std::max(second, p[i]);
  *margin = p[t] - second;
  return t;
}

// Logits of every position of `all` in one prefill (teacher forcing).
std::vector<float> logits_of(runtime::Engine& e, const std::vector<int32_t>& all) {
  std::vector<float> lg;
  auto seq = e.cache().create_seq();
  EXPECT_TRUE(seq.ok());
  EXPECT_TRUE(e.prefill(*seq, all, &lg, true).ok());
  e.cache().free_seq(*seq);
  return lg;
}

// Scores positions [from, n_tok - 1): the distributions predicting tokens from+1..
Closeness compare(const std::vector<float>& ref, const std::vector<float>& got, int64_t nv,
                  size_t from) {
  Closeness c;
  const size_t n_tok = ref.size() / nv;
  double kl_sum = 0;
  for (size_t t = from; t + 1 < n_tok; ++t, ++c.n) {
    const float* p = ref.data() + t * nv;
    const float* q = got.data() + t * nv;
    kl_sum += eval::kl_exact(p, q, static_cast<int>(nv));
    float margin = 0, unused = 0;
    const int64_t tp = top1(p, nv, &margin), tq = top1(q, nv, &unused);
    c.agree += tp == tq;
    if (margin >= kMargin) {
      ++c.wide;
      c.wide_agree += tp == tq;
    }
  }
  c.mean_kl = kl_sum / c.n;
  return c;
}

class KvE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "model missing: " << model_path();
  }
};

// The teacher-forced sequence: chat prompt + 48 greedy bf16 tokens.
struct Forced {
  std::vector<int32_t> all;
  size_t from = 0;  // first scored position (last prompt token)
};

Forced forced_sequence(runtime::Engine& bf) {
  Forced f;
  f.all = prompt_tokens(bf);
  f.from = f.all.size() - 1;
  const auto cont = greedy(bf, f.all, 48);
  EXPECT_GE(cont.size(), 32u) << "bf16 stopped early";
  f.all.insert(f.all.end(), cont.begin(), cont.end());
  return f;
}

// Teacher-forced closeness of `scheme` to bf16 on the forced sequence, printed.
Closeness vs_bf16(const char* scheme) {
  auto bf = engine("bf16");
  auto tq = engine(scheme);
  if (!bf || !tq) return {};
  const auto f = forced_sequence(*bf);
  const int64_t nv = bf->model().config().n_vocab;
  const auto c = compare(logits_of(*bf, f.all), logits_of(*tq, f.all), nv, f.from);
  std::printf("%s vs bf16: mean KL %.5f, top-1 %d/%d, wide-margin top-1 %d/%d\n", scheme, c.mean_kl,
              c.agree, c.n, c.wide_agree, c.wide);
  return c;
}

// k8v8 is near-lossless: measured KL ~0.005 and 46-47/48 top-1 on this model.
// The bounds below fail for k8v3-class error (KL ~0.03) and for any real
// layout or scale bug (KL > 0.1), so the test can fail.
TEST_F(KvE2e, TurboK8v8TracksBf16) {
  const Closeness c = vs_bf16("turbo:k8v8");
  ASSERT_GT(c.n, 0);
  EXPECT_LT(c.mean_kl, 0.02);
  ASSERT_GE(c.wide, c.n / 8) << "too few wide-margin positions to say anything";
  EXPECT_EQ(c.wide_agree, c.wide);
}

// The "greedy k8v8 == bf16 for 32 tokens", made ISA-independent:
// greedy k8v8 must follow bf16 token for token until the first position where
// bf16's own top-1 margin is narrower than kMargin (a near-tie, which fp32 order
// alone can flip: measured on AVX-512, the first divergence was token 23 and on
// AVX2 none in 32). A divergence at a wide-margin position fails, and so does
// one within the first 8 tokens.
TEST_F(KvE2e, TurboK8v8GreedyFollowsBf16UntilANearTie) {
  auto bf = engine("bf16");
  auto tq = engine("turbo:k8v8");
  ASSERT_TRUE(bf && tq);
  const auto prompt = prompt_tokens(*bf);
  const auto a = greedy(*bf, prompt, 32), b = greedy(*tq, prompt, 32);
  ASSERT_GE(a.size(), 32u) << "bf16 stopped early";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i >= 32) return;
  // Teacher-forced bf16 logits over prompt + the shared prefix: margin at i.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), a.begin(), a.begin() + static_cast<std::ptrdiff_t>(i));
  const int64_t nv = bf->model().config().n_vocab;
  const auto lg = logits_of(*bf, all);
  float margin = 0;
  top1(lg.data() + (all.size() - 1) * nv, nv, &margin);
  std::printf("greedy k8v8 == bf16 for %zu tokens; bf16 top-1 margin at the divergence %.3f\n", i,
              margin);
  EXPECT_GE(i, 8u) << "k8v8 left bf16 within the first 8 tokens";
  EXPECT_LT(margin, kMargin) << "divergence at token " << i << " where bf16 was not near a tie";
}

// The bounds are the spec §6 scale (k8v3 KL 0.03 on a 1B model) with head-room
// for a 135M model, not derived.
TEST_F(KvE2e, TurboK8v3StaysCloseToBf16) {
  const Closeness c = vs_bf16("turbo");
  ASSERT_GT(c.n, 0);
  EXPECT_LT(c.mean_kl, 0.15);
  EXPECT_GE(c.agree, c.n * 8 / 10);
}

// Fused kernel vs the dequantize-then-attend reference on real activations.
// Per call (--kv-attn verify: the reference runs on the fused engine's own
// inputs and is fed the kernel's own query, its int8 query on quantized keys):
// both read the same stored bytes and differ only in fp32 order, so they agree
// to ~1e-6 relative (measured 2e-7); a wrong page walk, bf16-window boundary,
// integer dot or deferred un-rotation is O(1). Against the fp32-query reference
// the int8 query adds up to ~0.1 relative on this model (a few heads with
// outlier query dims), which must stay within the derived bound
// (attention_fused_bound.h) on every call. Per logit: the matmuls quantize
// activations to Q8 blocks, so a 1e-7 difference can flip a rounding and the
// two engines' logits drift by up to ~1.4 (measured teacher-forced KL 0.003-
// 0.006 for bf16/k8v8, 0.025 for k8v3, whose V codebook decisions flip too):
// bound that loosely and require wide-margin top-1 equality. k4v2 drifts so far
// between two correct runs (KL 0.17-0.24) that only its per-call check means
// anything (max_kl < 0 skips the logit checks).
TEST_F(KvE2e, FusedMatchesReferencePath) {
  auto bf = engine("bf16");
  ASSERT_TRUE(bf);
  const auto f = forced_sequence(*bf);
  const int64_t nv = bf->model().config().n_vocab;
  const struct {
    const char* scheme;
    double max_kl;
  } cases[] = {
      {"turbo", 0.06}, {"turbo:k8v8", 0.02}, {"bf16", 0.02}, {"f16", 0.02}, {"turbo:k4v2", -1}};
  for (const auto& [scheme, max_kl] : cases) {
    // Under the sanitizers (memory and UB; the numerics are the release run's) the
    // float and the k8v8 pages are left out: bf16 and turbo take the same paths.
    if (testing::kSanitized &&
        (std::string(scheme) == "f16" || std::string(scheme) == "turbo:k8v8"))
      continue;
    auto fu = engine(scheme, ops::AttnMode::kVerify, 8);
    auto re = engine(scheme, ops::AttnMode::kReference, 8);
    ASSERT_TRUE(fu && re);
    const auto c = compare(logits_of(*re, f.all), logits_of(*fu, f.all), nv, f.from);
    greedy(*fu, prompt_tokens(*fu), 24);  // decode steps: one query, growing context
    const ops::AttnCheck chk = fu->model().attn_check();
    std::printf(
        "%s fused vs reference: %lld calls, max rel err %.3g (fp32 query: %.3g, %.3g of the "
        "bound); logits: mean KL %.6f, top-1 %d/%d, wide-margin top-1 %d/%d\n",
        scheme, static_cast<long long>(chk.calls), chk.max_rel_err, chk.max_rel_err_fp32q,
        chk.max_err_over_bound, c.mean_kl, c.agree, c.n, c.wide_agree, c.wide);
    EXPECT_GE(chk.calls, 25 * fu->model().config().n_layers)
        << scheme;  // 2 prefills + >= 23 decode steps
    EXPECT_LT(chk.max_rel_err, 1e-5) << scheme;
    EXPECT_LE(chk.max_err_over_bound, 1.0) << scheme;
    if (max_kl < 0) continue;
    EXPECT_LT(c.mean_kl, max_kl) << scheme;
    EXPECT_EQ(c.wide_agree, c.wide) << scheme;
  }
}

TEST_F(KvE2e, BadKvQuantIsRefusedWithValidForms) {
  for (const char* bad : {"turbo:k9v3", "int8", "turbo:k8"}) {
    auto s = kv::parse_kv_quant(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("turbo:k<K>v<V>"), std::string::npos)
        << s.status().message();
  }
  // A typed scheme no parser would give is refused too, before the model is read.
  runtime::EngineOptions o;
  o.model_path = model_path();
  o.cache.scheme = kv::parse_kv_quant("turbo").value();
  o.cache.scheme.k_bits = 9;
  auto e = runtime::Engine::create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("k_bits 9"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace tkv
