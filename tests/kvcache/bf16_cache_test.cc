// bf16 cache + paged attention == fp32 reference attention on the bf16-rounded
// K/V, for GQA 1/3/4/8, head_dim 64/128/256, lengths around page boundaries,
// sliding windows, multi-token (prefill) and single-token (decode) queries.
#include <array>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "kvcache/kv_cache.h"
#include "ops/attention.h"
#include "quant/half.h"

namespace tkv::kv {
namespace {

struct Case {
  int head_dim, n_kv_heads, group;
  int64_t n_ctx, window;
};

void run_case(const Case& c, ThreadPool& pool) {
  const int page = 16;
  KvShape shape{1, c.n_kv_heads, c.head_dim, {c.window}};
  CacheOptions opts;
  opts.page_size = page;
  opts.max_tokens = c.n_ctx + page;
  auto cache = create_cache(shape, opts);
  ASSERT_TRUE(cache.ok());
  auto& kv = *cache.value();
  auto seq = kv.create_seq();
  ASSERT_TRUE(seq.ok());
  std::mt19937 rng(c.head_dim * 131 + c.group * 7 + static_cast<int>(c.n_ctx));
  std::normal_distribution<float> nd(0.f, 1.f);
  const int n_heads = c.n_kv_heads * c.group;
  const size_t row = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  std::vector<float> k(static_cast<size_t>(c.n_ctx) * row), v(k.size()), kr(k.size()), vr(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = nd(rng);
    v[i] = nd(rng);
    kr[i] = bf16_to_f32(f32_to_bf16(k[i]));
    vr[i] = bf16_to_f32(f32_to_bf16(v[i]));
  }
  // Prefill all but the last token in one pass, then decode the last one.
  const int64_t n_pre = c.n_ctx - 1;
  for (int64_t step = 0; step < 2; ++step) {
    const int64_t pos0 = step == 0 ? 0 : n_pre, n = step == 0 ? n_pre : 1;
    if (n == 0) continue;
    ASSERT_TRUE(kv.reserve(*seq, n).ok());
    kv.write(0, *seq, pos0, n, k.data() + pos0 * row, v.data() + pos0 * row);
    std::vector<float> q(static_cast<size_t>(n * n_heads * c.head_dim));
    for (auto& x : q) x = nd(rng);
    std::vector<float> out(q.size()), ref(q.size());
    kernels::AttnArgs a{
        q.data(), out.data(), n, n_heads, pos0, c.window, 1.0f / std::sqrt(float(c.head_dim))};
    ASSERT_TRUE(
        ops::attention(a, kv.view(0, *seq, pos0 + n), ops::AttnMode::kFused, nullptr, pool).ok());
    kv.commit(*seq, n);
    a.out = ref.data();
    kernels::attention_f32_ref(kr.data(), vr.data(), pos0 + n, c.n_kv_heads, c.head_dim, a);
    // Output is a convex combination of V rows (|v| <~ 5): fp32 softmax + sums over
    // <= n_ctx terms give relative error ~ n_ctx * 2^-24 on scores; 2e-4 abs bounds it.
    double max_err = 0;
    size_t at = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(out[i]));
      const double e = std::fabs(out[i] - ref[i]);
      if (e > max_err) max_err = e, at = i;
    }
    EXPECT_LT(max_err, 2e-4) << "hd " << c.head_dim << " kvh " << c.n_kv_heads << " group "
                             << c.group << " ctx " << c.n_ctx << " window " << c.window << " step "
                             << step << " at " << at;
  }
}

TEST(Bf16Cache, AttentionMatchesReference) {
  ThreadPool pool(2);
  for (int hd : {64, 128, 256})
    for (int group : {1, 3, 4, 8})
      for (int64_t n_ctx : {1, 15, 17, 100}) run_case({hd, 2, group, n_ctx, 0}, pool);
  for (int64_t window : {1, 5, 16, 33}) run_case({64, 1, 4, 80, window}, pool);
}

TEST(Bf16Cache, ForkCopiesPartialPage) {
  KvShape shape{2, 1, 64, {0, 0}};
  CacheOptions opts;
  opts.page_size = 4;
  opts.max_tokens = 64;
  auto cache = create_cache(shape, opts);
  ASSERT_TRUE(cache.ok());
  auto& kv = *cache.value();
  auto a = kv.create_seq();
  std::vector<float> k(6 * 64, 1.0f), v(6 * 64, 2.0f);
  ASSERT_TRUE(kv.reserve(*a, 6).ok());
  for (int l = 0; l < 2; ++l) kv.write(l, *a, 0, 6, k.data(), v.data());
  kv.commit(*a, 6);
  auto b = kv.fork_seq(*a);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(kv.seq_len(*b), 6);
  // Appending to b must not change a: attend from a sees only its own values.
  std::vector<float> k2(64, -5.0f), v2(64, 100.0f);
  ASSERT_TRUE(kv.reserve(*b, 1).ok());
  for (int l = 0; l < 2; ++l) kv.write(l, *b, 6, 1, k2.data(), v2.data());
  kv.commit(*b, 1);
  ASSERT_TRUE(kv.reserve(*a, 1).ok());
  std::vector<float> k3(64, 1.0f), v3(64, 2.0f);
  for (int l = 0; l < 2; ++l) kv.write(l, *a, 6, 1, k3.data(), v3.data());
  std::vector<float> q(64, 0.1f), out(64);
  ThreadPool pool(1);
  kernels::AttnArgs args{q.data(), out.data(), 1, 1, 6, 0, 0.125f};
  ASSERT_TRUE(ops::attention(args, kv.view(1, *a, 7), ops::AttnMode::kFused, nullptr, pool).ok());
  for (float x : out) EXPECT_FLOAT_EQ(x, 2.0f);
}

// The page-copy hook sees every page copy the cache makes, with the page ids the
// views use: fork's partial page, then copy-on-write after a trim of a shared page.
TEST(Bf16Cache, PageCopyHookSeesEveryCopy) {
  KvShape shape{1, 1, 64, {0}};
  CacheOptions opts;
  opts.page_size = 4;
  opts.max_tokens = 64;
  auto cache = create_cache(shape, opts);
  ASSERT_TRUE(cache.ok());
  auto& kv = *cache.value();
  std::vector<std::array<int32_t, 3>> copies;
  kv.set_page_copy_hook([&](int store, int32_t src, int32_t dst) {
    copies.push_back({store, src, dst});
  });
  auto a = kv.create_seq();
  std::vector<float> k(6 * 64, 1.0f), v(6 * 64, 2.0f);
  ASSERT_TRUE(kv.reserve(*a, 6).ok());
  kv.write(0, *a, 0, 6, k.data(), v.data());
  kv.commit(*a, 6);
  EXPECT_TRUE(copies.empty());
  auto b = kv.fork_seq(*a);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(copies.size(), 1u);  // the partial second page; the full first one is shared
  const kernels::KvView va = kv.view(0, *a, 6), vb = kv.view(0, *b, 6);
  EXPECT_EQ(copies[0][0], 0);
  EXPECT_EQ(copies[0][1], va.segs[0].page_ids[1]);
  EXPECT_EQ(copies[0][2], vb.segs[0].page_ids[1]);
  EXPECT_EQ(va.segs[0].page_ids[0], vb.segs[0].page_ids[0]);
  // b trimmed into the shared first page, then written: that page is copied first.
  kv.trim_seq(*b, 2);
  ASSERT_TRUE(kv.reserve(*b, 1).ok());
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[1][1], va.segs[0].page_ids[0]);
  EXPECT_EQ(copies[1][2], kv.view(0, *b, 3).segs[0].page_ids[0]);
  kv.set_page_copy_hook(nullptr);
  auto c = kv.fork_seq(*a);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(copies.size(), 2u);  // cleared: no call
}

}  // namespace
}  // namespace tkv::kv
