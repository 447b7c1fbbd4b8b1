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

TEST(Status, CodesSurviveContextAndPropagation) {
  EXPECT_EQ(Status::ok().code(), StatusCode::kOk);
  EXPECT_EQ(Status::error("unclassified").code(), StatusCode::kUnknown);
  const Status full = Status::resource_exhausted("KV pool full");
  EXPECT_FALSE(full.is_ok());
  EXPECT_EQ(full.with_context("sequence 3").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.with_context("sequence 3").message(), "sequence 3: KV pool full");
  const Result<int> r = Status::out_of_range("prompt of 9000 tokens, context 8192");
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  auto relay = [&]() -> Result<int> {
    MINFER_ASSIGN_OR_RETURN(int v, r);
    return v;
  };
  EXPECT_EQ(relay().status().code(), StatusCode::kOutOfRange);
  const std::pair<Status, const char*> named[] = {
      {Status::invalid_argument("x"), "invalid argument"},
      {Status::not_found("x"), "not found"},
      {Status::unavailable("x"), "unavailable"},
      {Status::unimplemented("x"), "unimplemented"},
      {Status::io_error("x"), "I/O error"},
      {Status::internal("x"), "internal"}};
  for (const auto& [status, name] : named) EXPECT_STREQ(status_code_name(status.code()), name);
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
