// Prefix index of PageTable and the hash chain of prefix_key.h: keys name the
// whole prefix (position and namespace included), refcounts of mapped cached
// pages, LRU eviction order (deepest page of a chain first, only unreferenced
// pages), copy-on-write after a trim into a shared page, and the pool back in
// its start state once every sequence is freed and the index cleared.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kvcache/page_table.h"
#include "kvcache/prefix_key.h"

namespace tkv::kv {
namespace {

constexpr int kPs = 4;

std::vector<uint64_t> keys_of(const std::vector<int32_t>& toks, uint64_t ns = 7) {
  std::vector<uint64_t> k(toks.size() / kPs);
  prefix_block_keys(ns, toks.data(), static_cast<int64_t>(k.size()), kPs, k.data());
  return k;
}

// A sequence of n_pages full pages, each indexed under keys[i].
int filled_seq(PageTable& pt, const std::vector<uint64_t>& keys) {
  auto s = pt.create_seq();
  EXPECT_TRUE(s.ok());
  const int64_t n = static_cast<int64_t>(keys.size()) * kPs;
  EXPECT_TRUE(pt.reserve(*s, n).ok());
  pt.commit(*s, n);
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(pt.index_page(pt.pages(*s)[i], keys[i]));
  return *s;
}

TEST(PrefixKey, ChainNamesPositionAndNamespace) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> swapped = {5, 6, 7, 8, 1, 2, 3, 4};
  const auto ka = keys_of(a), ks = keys_of(swapped);
  EXPECT_EQ(ka, keys_of(a));  // deterministic
  // Block {5,6,7,8} as block 1 of a vs block 0 of swapped: same tokens, other prefix.
  EXPECT_NE(ka[1], ks[0]);
  EXPECT_NE(ka[0], ks[1]);
  EXPECT_NE(ka[0], ka[1]);
  EXPECT_EQ(ka[1], prefix_block_key(7, ka[0], a.data() + kPs, kPs));
  EXPECT_NE(ka[1], prefix_block_key(7, 0, a.data() + kPs, kPs));  // parent is part of the key
  const auto other_ns = keys_of(a, 8);
  EXPECT_NE(other_ns[0], ka[0]);
  EXPECT_NE(other_ns[1], ka[1]);
  // A change in block 0 changes every later key.
  std::vector<int32_t> b = a;
  b[0] = 99;
  EXPECT_NE(keys_of(b)[1], ka[1]);
}

TEST(PrefixIndex, CachedPagesOutliveTheirSequenceAndAreRefcounted) {
  PageTable pt(8, kPs, 3);
  const auto keys = keys_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const int a = filled_seq(pt, keys);
  const std::vector<int32_t> pa = pt.pages(a);
  EXPECT_EQ(pt.n_indexed_pages(), 3);
  EXPECT_FALSE(pt.index_page(pa[0], keys[0]));  // idempotent
  EXPECT_FALSE(pt.index_page(pa[1], 12345));    // a page has one key
  EXPECT_FALSE(pt.writable(pa[0]));             // indexed: never written again
  pt.free_seq(a);
  EXPECT_EQ(pt.n_free_pages(), 5);
  EXPECT_EQ(pt.n_available_pages(), 8);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pt.refcount(pa[static_cast<size_t>(i)]), 0);
    EXPECT_EQ(pt.find_cached(keys[static_cast<size_t>(i)]), pa[static_cast<size_t>(i)]);
  }
  // Two sequences map the first two cached pages.
  auto b = pt.create_seq(), c = pt.create_seq();
  for (int s : {*b, *c})
    for (int i = 0; i < 2; ++i) pt.map_cached(s, pt.find_cached(keys[static_cast<size_t>(i)]));
  EXPECT_EQ(pt.seq_len(*b), 8);
  EXPECT_EQ(pt.pages(*b), pt.pages(*c));
  EXPECT_EQ(pt.refcount(pa[0]), 2);
  EXPECT_EQ(pt.refcount(pa[2]), 0);
  EXPECT_EQ(pt.n_available_pages(), 6);  // 5 free + pa[2]
  // The next token goes to a new private page.
  ASSERT_TRUE(pt.reserve(*b, 1).ok());
  EXPECT_EQ(pt.pages(*b).size(), 3u);
  EXPECT_TRUE(pt.writable(pt.pages(*b)[2]));
  pt.free_seq(*b);
  EXPECT_EQ(pt.refcount(pa[0]), 1);
  pt.free_seq(*c);
  EXPECT_EQ(pt.refcount(pa[0]), 0);
  EXPECT_EQ(pt.n_indexed_pages(), 3);
}

TEST(PrefixIndex, EvictsLeastRecentlyUsedDeepestFirst) {
  PageTable pt(4, kPs, 3);
  const auto ka = keys_of({1, 1, 1, 1, 2, 2, 2, 2});
  const auto kb = keys_of({3, 3, 3, 3, 4, 4, 4, 4});
  const int a = filled_seq(pt, ka);
  const int b = filled_seq(pt, kb);
  pt.free_seq(a);  // LRU: a1, a0
  pt.free_seq(b);  // LRU: a1, a0, b1, b0
  EXPECT_EQ(pt.n_free_pages(), 0);
  auto c = pt.create_seq();
  const std::vector<std::vector<bool>> alive = {
      {true, false, true, true}, {false, false, true, true}, {false, false, true, false}};
  for (size_t step = 0; step < alive.size(); ++step) {
    ASSERT_TRUE(pt.reserve(*c, kPs).ok());
    pt.commit(*c, kPs);
    EXPECT_EQ(pt.evictions(), static_cast<int64_t>(step + 1));
    const std::vector<bool> got = {pt.find_cached(ka[0]) >= 0, pt.find_cached(ka[1]) >= 0,
                                   pt.find_cached(kb[0]) >= 0, pt.find_cached(kb[1]) >= 0};
    EXPECT_EQ(got, alive[step]) << "step " << step;
  }
  EXPECT_EQ(pt.n_indexed_pages(), 1);
}

TEST(PrefixIndex, OnlyUnreferencedPagesAreEvicted) {
  PageTable pt(4, kPs, 3);
  const auto ka = keys_of({1, 1, 1, 1, 2, 2, 2, 2});
  const int a = filled_seq(pt, ka);  // referenced by a
  auto b = pt.create_seq();
  Status st = pt.reserve(*b, 3 * kPs);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("out of KV pages"), std::string::npos) << st.message();
  EXPECT_EQ(pt.evictions(), 0);
  EXPECT_EQ(pt.n_indexed_pages(), 2);
  ASSERT_TRUE(pt.reserve(*b, 2 * kPs).ok());  // the 2 free pages
  EXPECT_EQ(pt.find_cached(ka[1]), pt.pages(a)[1]);
  // A mapped page leaves the LRU: once a frees its pages, b's map keeps ka[0].
  auto c = pt.create_seq();
  pt.map_cached(*c, pt.find_cached(ka[0]));
  pt.free_seq(a);
  EXPECT_EQ(pt.n_available_pages(), 1);  // ka[1] only
  pt.free_seq(*b);
  ASSERT_TRUE(pt.reserve(*c, 3 * kPs).ok());  // 2 free + evicts ka[1]
  EXPECT_EQ(pt.find_cached(ka[1]), -1);
  EXPECT_GE(pt.find_cached(ka[0]), 0);
  EXPECT_EQ(pt.evictions(), 1);
}

TEST(PrefixIndex, ReserveAfterTrimIntoASharedPageCopiesIt) {
  PageTable pt(8, kPs, 3);
  const auto ka = keys_of({1, 2, 3, 4, 5, 6, 7, 8});
  const int a = filled_seq(pt, ka);
  auto b = pt.create_seq();
  for (uint64_t k : ka) pt.map_cached(*b, pt.find_cached(k));
  const int32_t shared = pt.pages(a)[1];
  pt.trim(*b, 6);  // inside the shared second page
  EXPECT_EQ(pt.seq_len(*b), 6);
  EXPECT_EQ(pt.pages(*b)[1], shared);  // still mapped: a trim cannot fail
  PageCopy cow;
  ASSERT_TRUE(pt.reserve(*b, 1, &cow).ok());
  EXPECT_EQ(cow.src, shared);
  EXPECT_EQ(cow.dst, pt.pages(*b)[1]);
  EXPECT_NE(cow.dst, shared);
  EXPECT_TRUE(pt.writable(cow.dst));
  EXPECT_EQ(pt.refcount(shared), 1);
  EXPECT_EQ(pt.find_cached(ka[1]), shared);
  // A trim to a page boundary needs no copy; nor does a private partial page.
  PageCopy none;
  pt.commit(*b, 1);
  ASSERT_TRUE(pt.reserve(*b, 1, &none).ok());
  EXPECT_EQ(none.src, -1);
  // The owner of an indexed page copies it too (refcount 1 but indexed).
  pt.trim(a, 5);
  PageCopy own;
  ASSERT_TRUE(pt.reserve(a, 1, &own).ok());
  EXPECT_EQ(own.src, shared);
  EXPECT_EQ(pt.refcount(shared), 0);  // now only cached
  EXPECT_EQ(pt.find_cached(ka[1]), shared);
}

TEST(PrefixIndex, PoolReturnsToItsStartState) {
  PageTable pt(6, kPs, 3);
  const int a = filled_seq(pt, keys_of({1, 2, 3, 4, 5, 6, 7, 8}));
  auto b = pt.create_seq();
  pt.map_cached(*b, pt.pages(a)[0]);
  ASSERT_TRUE(pt.reserve(*b, 3).ok());
  pt.commit(*b, 3);
  int64_t sp = 0, dp = 0;
  auto c = pt.fork_seq(*b, &sp, &dp);
  ASSERT_TRUE(c.ok());
  for (int s : {a, *b, *c}) pt.free_seq(s);
  EXPECT_EQ(pt.n_indexed_pages(), 2);
  pt.clear_index();
  EXPECT_EQ(pt.n_indexed_pages(), 0);
  EXPECT_EQ(pt.n_free_pages(), 6);
  EXPECT_EQ(pt.n_available_pages(), 6);
  for (int32_t p = 0; p < 6; ++p) {
    EXPECT_EQ(pt.refcount(p), 0);
    EXPECT_FALSE(pt.indexed(p));
  }
  // Every page is handed out again, once.
  auto d = pt.create_seq();
  ASSERT_TRUE(pt.reserve(*d, 6 * kPs).ok());
  std::vector<int32_t> pages = pt.pages(*d);
  std::sort(pages.begin(), pages.end());
  std::vector<int32_t> all(6);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(pages, all);
}

}  // namespace
}  // namespace tkv::kv
