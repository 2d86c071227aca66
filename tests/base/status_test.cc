// Status / Result<T> behaviour: OK, errors, propagation macros.
#include "base/status.h"

#include <gtest/gtest.h>

namespace tkv {
namespace {
Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("[test] {} is not positive", x);
  return x * 2;
}
Result<int> twice(int x) {
  TKV_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return v + 1;
}
TEST(Status, OkAndError) {
  EXPECT_TRUE(Status().ok());
  Status s = invalid_argument("[x] bad {}", 3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "[x] bad 3");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}
TEST(Result, Propagates) {
  auto r = twice(4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 9);
  auto e = twice(-1);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "[test] -1 is not positive");
}
TEST(Result, OkStatusBecomesInternalError) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}
}  // namespace
}  // namespace tkv
