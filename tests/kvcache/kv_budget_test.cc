// KV pool sizing (issue 22): huge contexts are refused with a Status (they
// aborted with length_error / bad_alloc), a cache past its budget is refused
// naming the context, bytes, budget and the largest context that fits, and
// pools are touched lazily so RSS follows use, not capacity.
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

#include "base/mem_info.h"
#include "kvcache/kv_cache.h"

namespace tkv::kv {
namespace {

// SmolLM2-135M's cache shape: 30 layers, 3 kv heads, head_dim 64.
KvShape smol_shape() {
  return KvShape{30, 3, 64, std::vector<int64_t>(30, 0)};
}

size_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(KvBudget, Int64MaxContextIsAnError) {
  CacheOptions o;
  o.max_tokens = INT64_MAX;  // -c 9223372036854775807 overflowed ceil_div (length_error)
  o.budget_bytes = SIZE_MAX;
  auto c = create_cache(smol_shape(), o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("context 9223372036854775807"), std::string::npos)
      << c.status().message();
}

TEST(KvBudget, HugeWindowIsAnError) {
  KvShape s = smol_shape();
  s.layer_window[0] = INT64_MAX;  // Gemma sliding_window 2^63-1 overflowed add_group
  CacheOptions o;
  o.budget_bytes = SIZE_MAX;
  auto c = create_cache(s, o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("sliding window"), std::string::npos) << c.status().message();
}

TEST(KvBudget, OverBudgetNamesContextBytesBudgetAndLargestFit) {
  CacheOptions o;
  o.max_tokens = 100000000;  // -c 100000000 died on bad_alloc
  o.budget_bytes = size_t{64} << 20;
  auto c = create_cache(smol_shape(), o);
  ASSERT_FALSE(c.ok());
  const std::string msg = c.status().message();
  EXPECT_NE(msg.find("context of 100000000 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("67108864 bytes"), std::string::npos) << msg;
  const size_t at = msg.find("largest context that fits is ");
  ASSERT_NE(at, std::string::npos) << msg;
  const int64_t fit = std::stoll(msg.substr(at + 29));
  // 64 MiB / 23040 B per token (bf16, 30 layers x 3 heads x 64 x 2 x 2 B), in whole pages.
  EXPECT_GT(fit, 0);
  o.max_tokens = fit;
  auto ok = create_cache(smol_shape(), o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_LE(ok.value()->allocated_bytes(), o.budget_bytes);
  o.max_tokens = fit + o.page_size;
  EXPECT_FALSE(create_cache(smol_shape(), o).ok()) << "one more page should not fit";
}

TEST(KvBudget, PoolsAreTouchedLazily) {
  CacheOptions o;
  o.max_tokens = 200000;  // 4.4 GiB of bf16 pools: -c 200000 took 4.6 GB RSS for 4 tokens
  o.budget_bytes = SIZE_MAX;
  const size_t before = rss_bytes();
  auto c = create_cache(smol_shape(), o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_GT(c.value()->allocated_bytes(), size_t{4} << 30);
  const size_t grown = rss_bytes() - before;
  EXPECT_LT(grown, size_t{64} << 20) << "creating the cache touched " << grown << " bytes";
}

TEST(KvBudget, DefaultBudgetIsHalfOfAvailableMinusReserved) {
  const size_t avail = mem_available_bytes();
  if (avail == 0) GTEST_SKIP() << "/proc/meminfo has no MemAvailable";
  EXPECT_LE(default_kv_budget(0), avail / 2);
  EXPECT_GE(default_kv_budget(0), avail / 2 - (avail / 2) / 10);  // memory moves a little
  EXPECT_LE(default_kv_budget(size_t{256} << 20), avail / 2 - (size_t{256} << 20) + (avail / 20));
}

TEST(ByteSize, ParsesTheDocumentedForms) {
  EXPECT_EQ(parse_byte_size("512MiB").value(), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("8GiB").value(), size_t{8} << 30);
  EXPECT_EQ(parse_byte_size("2G").value(), size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5GB").value(), size_t{1500000000});
  EXPECT_EQ(parse_byte_size("4096").value(), size_t{4096});
  for (const char* bad : {"", "0", "-1G", "nan", "inf", "8 GiB", "8XB", "1e30", "GiB"})
    EXPECT_FALSE(parse_byte_size(bad).ok()) << bad;
}

}  // namespace
}  // namespace tkv::kv
