// Prefix sharing through the KvCache interface on synthetic K/V (a fixed
// function of token, position and layer, like a model's): attach maps only
// published full pages and never the whole prompt; attention over attached
// pages equals a cold sequence bit for bit (same bytes, same kernel); a trim into
// a shared page copies it before the write, leaving the publisher and later
// hits intact; eviction under pool pressure; layouts where sharing is off.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kvcache/kv_cache.h"
#include "ops/attention.h"

namespace tkv::kv {
namespace {

constexpr int kPs = 4, kHeads = 2, kDim = 64, kLayers = 2;
constexpr size_t kRow = size_t{kHeads} * kDim;

struct Fixture {
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<ThreadPool> pool = std::make_unique<ThreadPool>(1);
};

Fixture make(const std::string& scheme, uint64_t ns = 42, int64_t quant_start = 0,
             int64_t window = 0, int64_t max_tokens = 64) {
  KvShape shape{kLayers, kHeads, kDim, {0, window}};
  CacheOptions o;
  o.scheme = parse_kv_quant(scheme).value();
  o.page_size = kPs;
  o.max_tokens = max_tokens;
  o.max_seqs = 4;
  o.quant_start = quant_start;
  o.prefix_namespace = ns;
  auto c = create_cache(shape, o);
  EXPECT_TRUE(c.ok()) << c.status().message();
  Fixture f;
  if (c.ok()) f.kv = std::move(c).value();
  return f;
}

// K/V of one token at one position of one layer: [n_kv_heads, head_dim] each.
void token_kv(int32_t tok, int64_t pos, int layer, float* k, float* v) {
  std::mt19937 rng(static_cast<uint32_t>(tok) * 7919u + static_cast<uint32_t>(pos) * 31u +
                   static_cast<uint32_t>(layer));
  std::normal_distribution<float> nd(0.f, 1.f);
  for (size_t i = 0; i < kRow; ++i) k[i] = nd(rng), v[i] = nd(rng);
}

// Appends tokens[from, to) to seq as one pass.
void extend(KvCache& kv, int seq, const std::vector<int32_t>& tokens, int64_t from, int64_t to) {
  ASSERT_EQ(kv.seq_len(seq), from);
  ASSERT_LE(to, static_cast<int64_t>(tokens.size()));
  const int64_t n = to - from;
  ASSERT_TRUE(kv.reserve(seq, n).ok());
  std::vector<float> k(static_cast<size_t>(n) * kRow), v(k.size());
  for (int l = 0; l < kLayers; ++l) {
    for (int64_t t = 0; t < n; ++t)
      token_kv(tokens[static_cast<size_t>(from + t)], from + t, l, &k[t * kRow], &v[t * kRow]);
    kv.write(l, seq, from, n, k.data(), v.data());
  }
  kv.commit(seq, n);
}

// Attention of a fixed query at position seq_len - 1 over the whole sequence, every layer.
std::vector<float> attend_last(Fixture& f, int seq) {
  const int n_heads = kHeads * 3;
  std::vector<float> q(static_cast<size_t>(n_heads) * kDim), out(q.size()), all;
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.1f * static_cast<float>(i));
  for (int l = 0; l < kLayers; ++l) {
    kernels::AttnArgs a{q.data(), out.data(), 1, n_heads, f.kv->seq_len(seq) - 1, 0, 0.125f};
    const kernels::KvView view = f.kv->view(l, seq, f.kv->seq_len(seq));
    EXPECT_TRUE(ops::attention(a, view, ops::AttnMode::kFused, nullptr, *f.pool).ok());
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

std::vector<int32_t> iota_tokens(int n, int32_t start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = start + i;
  return t;
}

TEST(PrefixCache, AttachReusesPublishedFullPagesAndMatchesACold) {
  struct Cfg {
    const char* scheme;
    int64_t quant_start;
  };
  for (Cfg c : {Cfg{"bf16", 0}, Cfg{"turbo:k8v3", 0}, Cfg{"turbo:k4v2", 8}}) {
    SCOPED_TRACE(std::string(c.scheme) + " quant_start " + std::to_string(c.quant_start));
    Fixture f = make(c.scheme, 42, c.quant_start);
    auto& kv = *f.kv;
    std::vector<int32_t> p = iota_tokens(18, 100);  // 4 full pages + 2 tokens
    const int a = kv.create_seq().value();
    extend(kv, a, p, 0, 18);
    kv.publish_prefix(a, p.data(), 18);
    kv.publish_prefix(a, p.data(), 18);  // idempotent
    EXPECT_EQ(kv.prefix_stats().cached_pages, 4);
    // b = p + 4 more tokens: 16 cached tokens (all published full pages) are reused.
    std::vector<int32_t> q = p;
    for (int32_t t : {7, 8, 9, 10}) q.push_back(t);
    const int b = kv.create_seq().value();
    EXPECT_EQ(kv.attach_prefix(b, q.data(), 22), 16);
    EXPECT_EQ(kv.seq_len(b), 16);
    extend(kv, b, q, 16, 22);
    const int cold = kv.create_seq().value();
    extend(kv, cold, q, 0, 22);
    EXPECT_EQ(attend_last(f, b), attend_last(f, cold));
    kv.free_seq(b);
    kv.free_seq(cold);
    // Never the whole prompt: at most the largest page multiple below n.
    for (auto [n, want] : {std::pair<int64_t, int64_t>{16, 12}, {17, 16}, {4, 0}, {5, 4}, {1, 0}}) {
      const int s = kv.create_seq().value();
      EXPECT_EQ(kv.attach_prefix(s, p.data(), n), want) << "n " << n;
      EXPECT_EQ(kv.seq_len(s), want);
      kv.free_seq(s);
    }
    // A different token in block 2 stops the match after block 1.
    std::vector<int32_t> r = p;
    r[9] = 5;
    const int s = kv.create_seq().value();
    EXPECT_EQ(kv.attach_prefix(s, r.data(), 18), 8);
    EXPECT_EQ(kv.attach_prefix(s, p.data(), 18), 0);  // not empty any more: no-op
    const PrefixStats st = kv.prefix_stats();
    EXPECT_EQ(st.lookups, 6);
    EXPECT_EQ(st.looked_up_tokens, 22 + 16 + 17 + 4 + 5 + 18);  // n = 1 is no lookup
    EXPECT_EQ(st.hit_tokens, 16 + 12 + 16 + 0 + 4 + 8);
  }
}

TEST(PrefixCache, TrimIntoASharedPageCopiesBeforeWriting) {
  for (const char* scheme : {"bf16", "turbo:k8v3"}) {
    SCOPED_TRACE(scheme);
    Fixture f = make(scheme);
    auto& kv = *f.kv;
    const std::vector<int32_t> p = iota_tokens(17, 300);
    const int a = kv.create_seq().value();
    extend(kv, a, p, 0, 16);
    kv.publish_prefix(a, p.data(), 16);
    const std::vector<float> a_before = attend_last(f, a);
    const int b = kv.create_seq().value();
    ASSERT_EQ(kv.attach_prefix(b, p.data(), 17), 16);
    // b rewrites positions 10..12 with other tokens: page 2 (8..11) is shared.
    kv.trim_seq(b, 10);
    EXPECT_EQ(kv.seq_len(b), 10);
    std::vector<int32_t> other(p.begin(), p.begin() + 10);
    for (int32_t t : {1, 2, 3}) other.push_back(t);
    extend(kv, b, other, 10, 13);
    EXPECT_EQ(attend_last(f, a), a_before);  // the publisher's pages are untouched
    const int cold = kv.create_seq().value();
    extend(kv, cold, other, 0, 13);
    EXPECT_EQ(attend_last(f, b), attend_last(f, cold));
    kv.free_seq(cold);
    // A later hit still sees the published content.
    const int d = kv.create_seq().value();
    ASSERT_EQ(kv.attach_prefix(d, p.data(), 17), 16);
    EXPECT_EQ(attend_last(f, d), a_before);
    // The owner itself trims into its own indexed page: copied too.
    std::vector<int32_t> own = p;
    own[14] = 77;
    own[15] = 78;
    kv.trim_seq(a, 14);
    extend(kv, a, own, 14, 16);
    EXPECT_EQ(attend_last(f, d), a_before);
  }
}

TEST(PrefixCache, CachedPagesCountAsAvailableAndAreEvicted) {
  Fixture f = make("turbo:k8v3", 42, 0, 0, 32);  // 8 pages
  auto& kv = *f.kv;
  EXPECT_EQ(kv.available_pages(), 8);
  const std::vector<int32_t> p = iota_tokens(32, 500);
  const int a = kv.create_seq().value();
  extend(kv, a, p, 0, 32);
  kv.publish_prefix(a, p.data(), 32);
  EXPECT_EQ(kv.available_pages(), 0);
  kv.free_seq(a);
  EXPECT_EQ(kv.available_pages(), 8);
  EXPECT_EQ(kv.prefix_stats().cached_pages, 8);
  // A hit maps 7 pages (31 tokens max); the other sequence then has 1 page.
  const int b = kv.create_seq().value();
  EXPECT_EQ(kv.attach_prefix(b, p.data(), 32), 28);
  EXPECT_EQ(kv.available_pages(), 1);
  kv.free_seq(b);
  const int c = kv.create_seq().value();
  const std::vector<int32_t> q = iota_tokens(32, 900);
  extend(kv, c, q, 0, 20);  // 5 pages: 5 cached pages evicted, deepest first
  EXPECT_EQ(kv.prefix_stats().evictions, 5);
  EXPECT_EQ(kv.prefix_stats().cached_pages, 3);
  EXPECT_FALSE(kv.reserve(c, 13).ok());  // 4 more pages, 3 available
  kv.free_seq(c);
  const int d = kv.create_seq().value();
  EXPECT_EQ(kv.attach_prefix(d, p.data(), 32), 12);  // the chain's head survived
  kv.free_seq(d);
  kv.clear_prefix_cache();
  EXPECT_EQ(kv.prefix_stats().cached_pages, 0);
  EXPECT_EQ(kv.available_pages(), 8);
}

TEST(PrefixCache, OffWithoutNamespaceSlidingWindowOrUnalignedBf16Prefix) {
  const std::vector<int32_t> p = iota_tokens(20, 1);
  struct Cfg {
    uint64_t ns;
    int64_t quant_start, window;
  };
  for (Cfg c : {Cfg{0, 0, 0}, Cfg{42, 0, 8}, Cfg{42, 6, 0}}) {
    SCOPED_TRACE(std::to_string(c.ns) + " " + std::to_string(c.quant_start) + " " +
                 std::to_string(c.window));
    Fixture f = make("turbo:k8v3", c.ns, c.quant_start, c.window);
    auto& kv = *f.kv;
    const int a = kv.create_seq().value();
    extend(kv, a, p, 0, 20);
    kv.publish_prefix(a, p.data(), 20);
    const int b = kv.create_seq().value();
    EXPECT_EQ(kv.attach_prefix(b, p.data(), 20), 0);
    EXPECT_EQ(kv.seq_len(b), 0);
    const PrefixStats st = kv.prefix_stats();
    EXPECT_EQ(st.lookups, 0);
    EXPECT_EQ(st.cached_pages, 0);
  }
}

}  // namespace
}  // namespace tkv::kv
