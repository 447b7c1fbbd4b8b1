// cli/value_list: llama-bench's list and range syntax, and every way to get
// it wrong named in the message.
#include "cli/value_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace minfer::cli {
namespace {

std::vector<int64_t> values(const std::string& text, int64_t min = 0, int64_t max = 1 << 24) {
  auto r = parse_value_list("-p " + text, text, min, max);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return r.is_ok() ? *r : std::vector<int64_t>{};
}

std::string error(const std::string& text, int64_t min = 0, int64_t max = 1 << 24) {
  auto r = parse_value_list("-p " + text, text, min, max);
  EXPECT_FALSE(r.is_ok()) << text;
  return r.message();
}

using V = std::vector<int64_t>;

TEST(ValueList, SingleValuesAndLists) {
  EXPECT_EQ(values("512"), V({512}));
  EXPECT_EQ(values("0"), V({0}));
  EXPECT_EQ(values("512,2048"), V({512, 2048}));
  EXPECT_EQ(values("64,8,64"), V({64, 8, 64}));  // order and duplicates kept
}

TEST(ValueList, Ranges) {
  EXPECT_EQ(values("1-4"), V({1, 2, 3, 4}));
  EXPECT_EQ(values("8-8"), V({8}));
  EXPECT_EQ(values("128-512+128"), V({128, 256, 384, 512}));
  EXPECT_EQ(values("128-500+128"), V({128, 256, 384}));  // LAST need not be reached
  EXPECT_EQ(values("1-16*2"), V({1, 2, 4, 8, 16}));
  EXPECT_EQ(values("3-100*3"), V({3, 9, 27, 81}));
  EXPECT_EQ(values("0,1-2,64-256*4"), V({0, 1, 2, 64, 256}));
  // Steps that would pass the int64 range stop at LAST instead of overflowing.
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(values("1-" + std::to_string(big) + "*" + std::to_string(big), 0, big), V({1, big}));
  EXPECT_EQ(values("5-9+" + std::to_string(big), 0, big), V({5}));
}

TEST(ValueList, NotIntegers) {
  EXPECT_EQ(error("512,abc"), "-p 512,abc: 'abc' is not an integer");
  EXPECT_EQ(error("many"), "-p many: 'many' is not an integer");
  EXPECT_EQ(error(" 8"), "-p  8: ' 8' is not an integer");
  EXPECT_EQ(error("+8"), "-p +8: '+8' is not an integer");
  EXPECT_EQ(error("1.5"), "-p 1.5: '1.5' is not an integer");
  EXPECT_NE(error("8-x").find("'8-x' is not a value or a range (N, FIRST-LAST"), std::string::npos);
  EXPECT_NE(error("8-").find("'8-' is not a value or a range"), std::string::npos);
  EXPECT_NE(error("8-16+").find("'8-16+' is not a value or a range"), std::string::npos);
  EXPECT_NE(error("8-16/2").find("'8-16/2' is not a value or a range"), std::string::npos);
  EXPECT_NE(error("8-16+2+2").find("'8-16+2+2' is not a value or a range"), std::string::npos);
}

TEST(ValueList, EmptyItems) {
  for (const char* text : {"", ",", "512,", ",512", "512,,1024"}) {
    EXPECT_NE(error(text).find("an empty item"), std::string::npos) << text;
  }
}

TEST(ValueList, OutOfRange) {
  EXPECT_EQ(error("-3"), "-p -3: -3 is out of range (0 to 16777216)");
  EXPECT_EQ(error("8,16777217"), "-p 8,16777217: 16777217 is out of range (0 to 16777216)");
  EXPECT_EQ(error("1-99999999"), "-p 1-99999999: 99999999 is out of range (0 to 16777216)");
  EXPECT_EQ(error("0", 1, 10), "-p 0: 0 is out of range (1 to 10)");
  EXPECT_NE(error("99999999999999999999").find("'99999999999999999999' is not an integer"),
            std::string::npos);
}

TEST(ValueList, BadRanges) {
  EXPECT_EQ(error("16-8"), "-p 16-8: '16-8' is an empty range (LAST is below FIRST)");
  EXPECT_EQ(error("1--3"), "-p 1--3: -3 is out of range (0 to 16777216)");
  EXPECT_EQ(error("8-16+0"), "-p 8-16+0: '8-16+0': the step must be at least 1");
  EXPECT_EQ(error("8-16+-2"), "-p 8-16+-2: '8-16+-2': the step must be at least 1");
  EXPECT_EQ(error("8-16*1"), "-p 8-16*1: '8-16*1': the multiplier must be at least 2");
  EXPECT_EQ(error("0-16*2"), "-p 0-16*2: '0-16*2': a multiplied range must start at 1 or more");
}

TEST(ValueList, AbsurdListsAreRefused) {
  EXPECT_EQ(values("1-1000").size(), 1000u);
  EXPECT_EQ(error("1-1001"), "-p 1-1001: more than 1000 values");
  EXPECT_EQ(error("0-100000"), "-p 0-100000: more than 1000 values");
  EXPECT_EQ(error("1-600,1-600"), "-p 1-600,1-600: more than 1000 values");
}

}  // namespace
}  // namespace minfer::cli
