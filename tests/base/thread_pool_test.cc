// ThreadPool: every index covered exactly once, for many sizes and repeats.
#include "base/thread_pool.h"

#include <algorithm>
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
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << nt << " " << n;
      }
    }
  }
}
TEST(ThreadPool, DynamicCoversEveryChunkOnceWithFixedBoundaries) {
  for (int nt : {1, 2, 3, 7}) {
    ThreadPool pool(nt);
    for (int64_t n : {0, 1, 5, 64, 1001}) {
      for (int64_t grain : {1, 4, 16, 2000}) {
        for (int rep = 0; rep < 20; ++rep) {
          std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
          std::atomic<int> bad_bounds{0};
          pool.parallel_for_dynamic(n, grain, [&](int t, int64_t b, int64_t e) {
            if (b % grain != 0 || e != std::min(n, b + grain) || t < 0 || t >= nt)
              bad_bounds.fetch_add(1);
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          });
          ASSERT_EQ(bad_bounds.load(), 0) << nt << " " << n << " " << grain;
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << nt << " " << n;
        }
      }
      // Interleave with the static form: jobs must not leak into each other.
      std::atomic<int64_t> sum{0};
      pool.parallel_for(n, [&](int, int64_t b, int64_t e) { sum.fetch_add(e - b); });
      ASSERT_EQ(sum.load(), n);
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
