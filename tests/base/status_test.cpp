#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace minfer {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::error("value " + std::to_string(v) + " is not positive");
  return v;
}

Result<int> doubled(int v) {
  MINFER_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check(int v) {
  MINFER_RETURN_IF_ERROR(parse_positive(v).status().with_context("check"));
  return Status::ok();
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::ok().is_ok());
  Status e = Status::error("bad");
  EXPECT_FALSE(e.is_ok());
  EXPECT_EQ(e.message(), "bad");
  EXPECT_EQ(e.with_context("file.gguf").message(), "file.gguf: bad");
}

TEST(Result, PropagatesValuesAndErrors) {
  auto good = doubled(4);
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(*good, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.message(), "value -1 is not positive");
  EXPECT_EQ(check(-3).message(), "check: value -3 is not positive");
  EXPECT_TRUE(check(3).is_ok());
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.is_ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace minfer
