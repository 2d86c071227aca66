// The backend seam (ops::attention over KvCache::view): one case table (schemes ×
// lengths × GQA, a bf16 prefix segment, a sliding window) runs on every backend
// built, each case's fused path against the reference path on the same pages
// within the derived bound (attention_fused_bound.h); verify keeps the fused output
// bit for bit and records every call. A backend that is not built, has no device,
// or has no kernel over host pages yet skips (GTEST_SKIP) with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/attention_fused_bound.h"
#include "kvcache/kv_cache.h"
#include "ops/attention.h"
#include "ops/dispatch.h"

namespace tkv::ops {
namespace {

struct Case {
  const char* scheme;
  int64_t n_ctx;
  int group;  // query heads per kv head
  int64_t quant_start = 0;
  int64_t window = 0;
};

std::vector<Case> case_table() {
  std::vector<Case> t;
  for (const char* s : {"bf16", "f16", "8", "4", "turbo", "turbo:k4v3", "turbo:k2v2"})
    for (int64_t n : {1, 63, 64, 65, 200})
      for (int g : {1, 3}) t.push_back({s, n, g});
  t.push_back({"turbo", 100, 3, 16});      // two segments: bf16 prefix, then turbo
  t.push_back({"4", 100, 2, 0, 40});       // sliding window
  t.push_back({"turbo", 130, 1, 20, 50});  // both
  return t;
}

std::string name(const Case& c) {
  return std::string(c.scheme) + " n_ctx " + std::to_string(c.n_ctx) + " group " +
         std::to_string(c.group) + " quant_start " + std::to_string(c.quant_start) + " window " +
         std::to_string(c.window);
}

class OpsAttention : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (!backend_available(GetParam()))
      GTEST_SKIP() << backend_name(GetParam()) << ": not built or no device";
  }
  // Runs a prefill of every token, then a decode of the last, through ops::attention on
  // the backend; false when the backend has no kernel (the caller skips).
  bool run(const Case& c, ThreadPool& pool);
};

bool OpsAttention::run(const Case& c, ThreadPool& pool) {
  const int d = 64, nkv = 2, n_heads = nkv * c.group;
  kv::CacheOptions o;
  o.scheme = kv::parse_kv_quant(c.scheme).value();
  o.page_size = 16;
  o.max_tokens = c.n_ctx + 16;
  o.max_seqs = 1;
  o.quant_start = c.quant_start;
  auto made = kv::create_cache(kv::KvShape{1, nkv, d, {c.window}}, o);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return true;
  kv::KvCache& cache = *made.value();
  const int seq = cache.create_seq().value();
  std::mt19937 rng(static_cast<unsigned>(c.n_ctx * 31 + c.group));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> k(static_cast<size_t>(c.n_ctx * nkv * d)), v(k.size()),
      q(static_cast<size_t>(c.n_ctx * n_heads * d));
  for (auto* x : {&k, &v, &q})
    for (float& e : *x) e = nd(rng);
  EXPECT_TRUE(cache.reserve(seq, c.n_ctx).ok());
  cache.write(0, seq, 0, c.n_ctx, k.data(), v.data());
  const kernels::KvView view = cache.view(0, seq, c.n_ctx);
  EXPECT_EQ(view.n_total(), c.n_ctx) << name(c);
  EXPECT_EQ(view.n_segs, c.quant_start > 0 && c.n_ctx > c.quant_start ? 2 : 1) << name(c);

  AttnCheckLog log;
  for (const int64_t q_pos0 : {int64_t{0}, c.n_ctx - 1}) {  // prefill, then decode
    const int64_t n_q = c.n_ctx - q_pos0;
    const size_t n_out = static_cast<size_t>(n_q * n_heads * d);
    std::vector<float> fused(n_out), ref(n_out), checked(n_out);
    kernels::AttnArgs a{
        q.data() + q_pos0 * n_heads * d,        fused.data(), n_q, n_heads, q_pos0, c.window,
        1.0f / std::sqrt(static_cast<float>(d))};
    const Status st = attention(a, view, AttnMode::kFused, nullptr, pool, GetParam());
    if (st.code() == StatusCode::kUnimplemented) {
      std::printf("%s\n", st.message().c_str());
      return false;
    }
    EXPECT_TRUE(st.ok()) << st.message();
    a.out = ref.data();
    EXPECT_TRUE(attention(a, view, AttnMode::kReference, nullptr, pool, GetParam()).ok());
    a.out = checked.data();
    EXPECT_TRUE(attention(a, view, AttnMode::kVerify, &log, pool, GetParam()).ok());

    const double bound = kernels::fused_attention_bound(view.segs, view.n_segs, a);
    double err = 0;
    for (size_t i = 0; i < n_out; ++i)  // a non-finite output counts as infinitely off
      err =
          std::max(err, std::isfinite(fused[i]) ? std::fabs(double{fused[i]} - ref[i]) : INFINITY);
    EXPECT_LE(err, bound) << name(c) << " q_pos0 " << q_pos0;
    EXPECT_EQ(0, std::memcmp(fused.data(), checked.data(), n_out * sizeof(float)))
        << name(c) << ": verify must keep the fused output";
  }
  const AttnCheck chk = log.totals();
  EXPECT_EQ(chk.calls, 2) << name(c);
  EXPECT_LE(chk.max_err_over_bound, 1.0) << name(c);
  EXPECT_LT(chk.max_rel_err, 1e-4) << name(c);
  return true;
}

TEST_P(OpsAttention, CaseTableFusedMatchesReference) {
  ThreadPool pool(2);
  for (const Case& c : case_table()) {
    if (!run(c, pool)) GTEST_SKIP() << backend_name(GetParam()) << ": no kernel for host pages";
    if (HasFatalFailure()) return;
  }
}

TEST_P(OpsAttention, RefusesBadCalls) {
  ThreadPool pool(1);
  std::vector<float> q(64), out(64);
  kernels::AttnArgs a{q.data(), out.data(), 1, 1, 0, 0, 0.125f};
  const Status empty = attention(a, kernels::KvView{}, AttnMode::kFused, nullptr, pool, GetParam());
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument) << empty.message();
  auto made = kv::create_cache(kv::KvShape{1, 2, 32, {0}}, kv::CacheOptions{});
  ASSERT_TRUE(made.ok());
  const int seq = made.value()->create_seq().value();
  ASSERT_TRUE(made.value()->reserve(seq, 1).ok());
  const kernels::KvView view = made.value()->view(0, seq, 1);
  a.n_heads = 3;  // not a multiple of 2 kv heads
  EXPECT_EQ(attention(a, view, AttnMode::kFused, nullptr, pool, GetParam()).code(),
            StatusCode::kInvalidArgument);
  a.n_heads = 2;
  a.q_pos0 = 1;  // past the one cached token
  EXPECT_EQ(attention(a, view, AttnMode::kFused, nullptr, pool, GetParam()).code(),
            StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, OpsAttention, ::testing::Values(Backend::kCpu, Backend::kCuda),
                         [](const ::testing::TestParamInfo<Backend>& i) {
                           return std::string(backend_name(i.param));
                         });

}  // namespace
}  // namespace tkv::ops
