// PageTable invariants: allocation, reuse after free, fork refcounts, trim,
// exhaustion errors, sliding-window release.
#include "kvcache/page_table.h"

#include <gtest/gtest.h>

namespace tkv::kv {
namespace {

TEST(PageTable, ReserveCommitAndReuse) {
  PageTable pt(4, 16, 2);
  auto s = pt.create_seq();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(pt.reserve(*s, 17).ok());  // 2 pages
  pt.commit(*s, 17);
  EXPECT_EQ(pt.seq_len(*s), 17);
  EXPECT_EQ(pt.pages(*s).size(), 2u);
  EXPECT_EQ(pt.n_free_pages(), 2);
  ASSERT_TRUE(pt.reserve(*s, 15).ok());  // fits the 2nd page exactly
  pt.commit(*s, 15);
  EXPECT_EQ(pt.pages(*s).size(), 2u);
  pt.free_seq(*s);
  EXPECT_EQ(pt.n_free_pages(), 4);
  auto s2 = pt.create_seq();
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(pt.reserve(*s2, 64).ok());  // all 4 pages reused
  EXPECT_EQ(pt.n_free_pages(), 0);
}

TEST(PageTable, ExhaustionIsAnErrorAndChangesNothing) {
  PageTable pt(2, 8, 1);
  auto s = pt.create_seq();
  ASSERT_TRUE(s.ok());
  Status st = pt.reserve(*s, 17);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("out of KV pages"), std::string::npos);
  EXPECT_EQ(pt.n_free_pages(), 2);
  EXPECT_FALSE(pt.create_seq().ok());  // only one slot
}

TEST(PageTable, ForkSharesFullPagesAndCopiesPartial) {
  PageTable pt(8, 4, 3);
  auto a = pt.create_seq();
  ASSERT_TRUE(pt.reserve(*a, 10).ok());
  pt.commit(*a, 10);  // pages: full, full, partial(2)
  int64_t sp, dp;
  auto b = pt.fork_seq(*a, &sp, &dp);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(pt.seq_len(*b), 10);
  EXPECT_EQ(pt.pages(*b)[0], pt.pages(*a)[0]);
  EXPECT_EQ(pt.pages(*b)[1], pt.pages(*a)[1]);
  EXPECT_NE(pt.pages(*b)[2], pt.pages(*a)[2]);
  EXPECT_EQ(sp, pt.pages(*a)[2]);
  EXPECT_EQ(dp, pt.pages(*b)[2]);
  EXPECT_EQ(pt.refcount(pt.pages(*a)[0]), 2);
  pt.free_seq(*a);
  EXPECT_EQ(pt.refcount(pt.pages(*b)[0]), 1);
  pt.free_seq(*b);
  EXPECT_EQ(pt.n_free_pages(), 8);
}

TEST(PageTable, TrimReturnsPages) {
  PageTable pt(8, 4, 1);
  auto a = pt.create_seq();
  ASSERT_TRUE(pt.reserve(*a, 20).ok());
  pt.commit(*a, 20);
  pt.trim(*a, 5);
  EXPECT_EQ(pt.seq_len(*a), 5);
  EXPECT_EQ(pt.pages(*a).size(), 2u);
  EXPECT_EQ(pt.n_free_pages(), 6);
  pt.trim(*a, 0);
  EXPECT_EQ(pt.n_free_pages(), 8);
}

TEST(PageTable, ReleaseBeforeFreesWholeOldPages) {
  PageTable pt(8, 4, 1);
  auto a = pt.create_seq();
  ASSERT_TRUE(pt.reserve(*a, 16).ok());
  pt.commit(*a, 16);
  pt.release_before(*a, 9);  // pages 0 and 1 hold only tokens < 8
  EXPECT_EQ(pt.pages(*a)[0], -1);
  EXPECT_EQ(pt.pages(*a)[1], -1);
  EXPECT_GE(pt.pages(*a)[2], 0);
  EXPECT_EQ(pt.n_free_pages(), 6);
  pt.free_seq(*a);
  EXPECT_EQ(pt.n_free_pages(), 8);
}

}  // namespace
}  // namespace tkv::kv
