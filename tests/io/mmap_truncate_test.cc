// A file truncated while mapped (issue 22): reading a page past the new end
// raised SIGBUS and killed the process. Inside guarded_read it is now an
// error; elsewhere the process exits with a message naming the file.
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "io/mmap_file.h"

namespace tkv::io {
namespace {

constexpr size_t kBytes = 1 << 20;

std::string make_file(const std::string& name) {
  const std::string p = ::testing::TempDir() + name;
  std::ofstream(p, std::ios::binary) << std::string(kBytes, 'x');
  return p;
}

struct ReadJob {
  const uint8_t* p;  // [1] a byte of the mapping
  uint8_t got;
  static void run(void* a) {
    auto* j = static_cast<ReadJob*>(a);
    j->got = *static_cast<const volatile uint8_t*>(j->p);
  }
};

TEST(MmapTruncate, GuardedReadOfAShrunkFileIsAnError) {
  const std::string path = make_file("shrink_guarded.bin");
  auto f = MmapFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ReadJob ok{f.value()->data() + kBytes / 2, 0};
  ASSERT_TRUE(f.value()->guarded_read(&ReadJob::run, &ok).ok());
  EXPECT_EQ(ok.got, 'x');
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  ReadJob bad{f.value()->data() + kBytes - 1, 0};
  const Status st = f.value()->guarded_read(&ReadJob::run, &bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("truncated while mapped"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

// Child body of the death test: map, truncate, read past the new end.
void read_after_truncate(const std::string& path) {
  auto f = MmapFile::open(path);
  if (!f.ok()) std::_Exit(3);
  if (::truncate(path.c_str(), 0) != 0) std::_Exit(4);
  ReadJob j{f.value()->data() + kBytes - 1, 0};
  ReadJob::run(&j);
  std::_Exit(5);  // the read should not have succeeded
}

TEST(MmapTruncateDeathTest, UnguardedReadExitsWithAMessage) {
  const std::string path = make_file("shrink_unguarded.bin");
  EXPECT_EXIT(read_after_truncate(path), ::testing::ExitedWithCode(1), "truncated while mapped");
}

}  // namespace
}  // namespace tkv::io
