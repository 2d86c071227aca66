// Quantized caches through the KvCache interface (pages via KvCache::view, attention
// via ops::attention): the reference path equals
// attention_f32_ref on the expected dequantized K/V bit for bit (bf16 below
// --kv-quant-start, the codec round trip from there: the boundary is exact), the
// fused path matches it within the derived bound (attention_fused_bound.h, int8
// query included) and the reference fed the kernel's own query within the fp32
// bound, sliding-window layers rotate their pages, and fork/trim/free keep
// sequences independent with pages reused.
#include <gtest/gtest.h>

#include "kernels/attention/attention_fused_bound.h"
#include "kvcache/kv_cache.h"
#include "ops/attention.h"
#include "quant_cache_expect.h"

namespace tkv::kv {
namespace {

using testing::Expect;
using testing::expected_rows;
using testing::expected_segments;

// max |got - want| and where; a non-finite output fails and counts as infinite.
double max_abs_diff(const std::vector<float>& got, const std::vector<float>& want, size_t* at) {
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << "non-finite output " << got[i] << " at " << i;
      *at = i;
      return INFINITY;
    }
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (e > m) m = e, *at = i;
  }
  return m;
}

struct Rig {
  std::string scheme;
  int64_t quant_start = 0;
  int d = 64, nkv = 2, group = 3;
  std::vector<int64_t> windows{0};
  std::unique_ptr<KvCache> kv;
  std::mt19937 rng{7};

  void make(CacheOptions o) {
    o.scheme = parse_kv_quant(scheme).value();
    o.quant_start = quant_start;
    KvShape shape{static_cast<int>(windows.size()), nkv, d, windows};
    auto a = create_cache(shape, o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    kv = std::move(a).value();
  }

  // Appends n tokens to seq in both caches, attends every layer, checks outputs.
  void step(int seq, int64_t n, Expect* ex, ThreadPool& pool) {
    std::normal_distribution<float> nd(0.f, 1.f);
    const int n_heads = nkv * group;
    const size_t row = static_cast<size_t>(nkv) * d;
    const int64_t pos0 = kv->seq_len(seq);
    std::vector<float> k(static_cast<size_t>(n) * row), v(k.size()),
        q(static_cast<size_t>(n * n_heads * d));
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (auto& x : q) x = nd(rng);
    expected_rows(scheme, quant_start, d, nkv, pos0, n, k.data(), v.data(), ex);
    ASSERT_TRUE(kv->reserve(seq, n).ok());
    const auto segs = expected_segments(scheme, quant_start, d, nkv, *ex);
    std::vector<kernels::KvSegmentView> views;
    for (const auto& sg : segs) views.push_back(sg.view);
    const int nv = static_cast<int>(views.size());
    for (int l = 0; l < static_cast<int>(windows.size()); ++l) {
      kv->write(l, seq, pos0, n, k.data(), v.data());
      std::vector<float> of(q.size()), orf(q.size()), oe(q.size());
      kernels::AttnArgs a{q.data(),
                          of.data(),
                          n,
                          n_heads,
                          pos0,
                          windows[static_cast<size_t>(l)],
                          1.0f / std::sqrt(static_cast<float>(d))};
      const kernels::KvView view = kv->view(l, seq, pos0 + n);
      ASSERT_TRUE(ops::attention(a, view, ops::AttnMode::kFused, nullptr, pool).ok());
      a.out = orf.data();
      ASSERT_TRUE(ops::attention(a, view, ops::AttnMode::kReference, nullptr, pool).ok());
      a.out = oe.data();
      kernels::attention_f32_ref(ex->k.data(), ex->v.data(), pos0 + n, nkv, d, a);
      ASSERT_EQ(0, std::memcmp(orf.data(), oe.data(), oe.size() * sizeof(float)))
          << scheme << " reference path != oracle on expected rows, layer " << l << " pos0 "
          << pos0;
      // Bounds measured on the rebuilt segments, which hold the cache's bytes: the
      // reference over them reproduces the reference path bit for bit.
      std::vector<float> o8(q.size()), orb(q.size());
      a.out = orb.data();
      kernels::attention_paged_ref(views.data(), nv, a);
      ASSERT_EQ(0, std::memcmp(orb.data(), orf.data(), orf.size() * sizeof(float)))
          << scheme << " rebuilt segments != cache, layer " << l << " pos0 " << pos0;
      a.out = o8.data();
      kernels::attention_paged_ref(views.data(), nv, a, kernels::RefQuery::kAsFused);
      const kernels::FusedBoundInputs ti = kernels::fused_bound_inputs(views.data(), nv, a);
      const double tol = kernels::fused_bound(ti, d, pos0 + n);
      const double tol8 = kernels::fused_bound(ti, d, pos0 + n, kernels::RefQuery::kAsFused);
      size_t at = 0, at8 = 0;
      const double err = max_abs_diff(of, orf, &at), err8 = max_abs_diff(of, o8, &at8);
      EXPECT_LE(err, tol) << scheme << " fused vs reference, layer " << l << " pos0 " << pos0
                          << " at " << at;
      EXPECT_LE(err8, tol8) << scheme << " fused vs reference on the kernel's own query, layer "
                            << l << " pos0 " << pos0 << " at " << at8;
    }
    kv->commit(seq, n);
  }
};

const char* kSchemes[] = {"bf16",         "f16",         "8",           "4",
                          "turbo",        "turbo:k8v8",  "turbo:k4v3",  "turbo:k2v2",
                          "turbo:k5v5",   "turbo:k4v3m", "turbo:k8v2m", "turbo:k8sv4",
                          "turbo:k4sv4m", "turbo:k8sv3a"};

TEST(QuantCache, PrefillDecodeAndQuantStartBoundary) {
  ThreadPool pool(2);
  for (const char* s : kSchemes)
    for (int64_t qs : {0, 1, 16, 17, 40}) {
      Rig r;
      r.scheme = s;
      r.quant_start = qs;
      CacheOptions o;
      o.page_size = 16;
      o.max_tokens = 256;
      o.max_seqs = 2;
      r.make(o);
      Expect ex;
      auto seq = r.kv->create_seq();
      ASSERT_TRUE(seq.ok());
      r.step(*seq, 15, &ex, pool);  // page - 1
      r.step(*seq, 2, &ex, pool);   // crosses the page (17 = page + 1)
      for (int i = 0; i < 8; ++i) r.step(*seq, 1, &ex, pool);
      r.step(*seq, 33, &ex, pool);
      if (HasFatalFailure()) return;
    }
}

TEST(QuantCache, SlidingWindowPagesRotate) {
  ThreadPool pool(2);
  for (const char* s : {"bf16", "turbo", "4"}) {
    Rig r;
    r.scheme = s;
    r.quant_start = 20;
    r.windows = {0, 24};
    CacheOptions o;
    o.page_size = 16;
    o.max_tokens = 700;
    o.max_seqs = 1;
    o.max_chunk_tokens = 8;  // window pool: ceil((24 + 8) / 16) + 3 = 5 pages
    r.make(o);
    Expect ex;
    auto seq = r.kv->create_seq();
    for (int i = 0; i < 75; ++i)
      r.step(*seq, 8, &ex, pool);  // 600 tokens through a 5-page window pool
    if (HasFatalFailure()) return;
    r.kv->trim_seq(*seq, 595);  // within the one-page slack
    ex.trim(595, 2 * 64);
    r.step(*seq, 3, &ex, pool);
  }
}

TEST(QuantCache, ForkTrimFreeAndPageReuse) {
  ThreadPool pool(2);
  for (const char* s : kSchemes) {
    Rig r;
    r.scheme = s;
    r.quant_start = 10;
    CacheOptions o;
    o.page_size = 8;
    o.max_tokens = 128;
    o.max_seqs = 3;
    r.make(o);
    const size_t alloc = r.kv->allocated_bytes();
    Expect ea, eb;
    auto a = r.kv->create_seq();
    r.step(*a, 13, &ea, pool);  // partial page, straddles quant_start
    auto b = r.kv->fork_seq(*a);
    ASSERT_TRUE(b.ok());
    eb = ea;
    r.step(*b, 5, &eb, pool);  // b diverges ...
    r.step(*a, 4, &ea, pool);  // ... and a still sees only its own rows
    r.kv->trim_seq(*a, 9);
    ea.trim(9, 2 * 64);
    r.step(*a, 6, &ea, pool);  // re-append across the boundary after a trim
    r.step(*b, 1, &eb, pool);
    r.kv->free_seq(*a);
    r.kv->free_seq(*b);
    auto c = r.kv->create_seq();
    ASSERT_TRUE(c.ok());
    // Capacity: max_tokens in the scheme's pool, plus the bf16 prefix below quant_start.
    const int64_t cap =
        128 +
        (std::string(s) == "bf16" || std::string(s) == "f16" ? 0 : 10);  // float schemes: no prefix
    EXPECT_EQ(cap, r.kv->capacity_tokens());
    EXPECT_TRUE(r.kv->reserve(*c, cap).ok()) << s << ": freed pages must be reusable";
    EXPECT_FALSE(r.kv->reserve(*c, cap + 1).ok()) << s << ": capacity exceeded";
    EXPECT_EQ(alloc, r.kv->allocated_bytes());
  }
}

TEST(QuantCache, BytesPerTokenAndNames) {
  KvShape shape{2, 4, 128, {0, 0}};
  CacheOptions o;
  o.scheme = parse_kv_quant("turbo").value();
  auto c = create_cache(shape, o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()->bytes_per_token(),
            2u * 4u * 200u);  // spec §1: k8v3 = 200 B per token per kv head at D=128
  EXPECT_EQ(c.value()->scheme_name(), "turbo:k8v3");
  o.scheme = parse_kv_quant("bf16").value();
  EXPECT_EQ(create_cache(shape, o).value()->bytes_per_token(), 2u * 4u * 512u);
}

TEST(QuantCache, BadSchemesAndHeadDims) {
  KvShape shape{1, 1, 64, {0}};
  CacheOptions o;
  for (const char* bad : {"turbo:k3v3", "turbo:k8v9", "q8", "", "turbo:", "16"}) {
    auto s = parse_kv_quant(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("turbo:k<K>v<V>"), std::string::npos)
        << s.status().message();
  }
  // Typed schemes the parser never gives are refused by the cache, naming the field.
  o.scheme = parse_kv_quant("turbo").value();
  o.scheme.v_bits = 7;
  auto bad_bits = create_cache(shape, o);
  ASSERT_FALSE(bad_bits.ok());
  EXPECT_NE(bad_bits.status().message().find("v_bits 7"), std::string::npos)
      << bad_bits.status().message();
  o.scheme = parse_kv_quant("bf16").value();
  o.scheme.v_absmax = true;
  EXPECT_FALSE(create_cache(shape, o).ok());
  KvShape odd{1, 1, 80, {0}};
  o.scheme = parse_kv_quant("turbo").value();
  auto c = create_cache(odd, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("head_dim 80"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("64, 128, 256, 512"), std::string::npos)
      << c.status().message();
  o.scheme = parse_kv_quant("bf16").value();
  EXPECT_TRUE(create_cache(odd, o).ok());
  EXPECT_FALSE(parse_swa_mode("f16").ok());
}

TEST(QuantCache, MemoryModel) {
  KvShape shape{4, 2, 64, {0, 512, 0, 512}};
  CacheOptions o;
  o.scheme = parse_kv_quant("turbo").value();
  const KvMemoryModel m = kv_memory_model(shape, o).value();
  const size_t row = 64 + 24 + 12;  // k8 + v3 + 3 fp16 per 32-group
  EXPECT_EQ(m.full_bytes_per_token, 2 * 2 * row);
  EXPECT_EQ(m.bytes_per_token, 4 * 2 * row);
  EXPECT_EQ(m.window_bytes_per_seq, 2 * 2 * row * 512);
  EXPECT_EQ(kv_max_context(m, m.window_bytes_per_seq + 10 * m.full_bytes_per_token), 10);
}

}  // namespace
}  // namespace tkv::kv
