// ThreadPool: every index covered exactly once, for many sizes and repeats.
#include "base/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace tkv {
namespace {
TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int nt : {1, 2, 3, 7}) {
    ThreadPool pool(nt);
    for (int64_t n : {0, 1, 2, 5, 64, 1001}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << nt << " " << n;
      }
    }
  }
}
TEST(ThreadPool, RunOnAllUsesEveryThread) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run_on_all([&](int t) { seen[static_cast<size_t>(t)].fetch_add(1); });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}
}  // namespace
}  // namespace tkv
