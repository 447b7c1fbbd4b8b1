#include "base/large_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace minfer {
namespace {

constexpr uintptr_t kTwoMiB = uintptr_t{2} << 20;

TEST(LargePages, LargeArraysStartOnA2MiBBoundary) {
  for (size_t bytes : {kTwoMiB, kTwoMiB + 1, 3 * kTwoMiB + 4096}) {
    void* p = allocate_large(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kTwoMiB, 0u) << bytes << " bytes";
    // Every byte asked for is writable (the rounding never shortens it).
    static_cast<uint8_t*>(p)[bytes - 1] = 0x5a;
    free_large(p);
  }
}

TEST(LargePages, SmallArraysAreCacheLineAligned) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{(2u << 20) - 1}}) {
    void* p = allocate_large(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes << " bytes";
    free_large(p);
  }
}

TEST(LargePages, VectorKeepsItsContentsThroughGrowthAndCopy) {
  std::vector<uint32_t, LargePageAllocator<uint32_t>> v(1000);
  std::iota(v.begin(), v.end(), 7u);
  v.resize(size_t{1} << 20);  // 4 MiB: moves to a huge-page-aligned block
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kTwoMiB, 0u);
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i + 7);
  EXPECT_EQ(v[1000], 0u);
  const auto copy = v;
  EXPECT_EQ(copy, v);
}

TEST(LargePages, ImpossibleSizeThrowsBadAlloc) {
  LargePageAllocator<uint64_t> alloc;
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 16), std::bad_alloc);
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 4), std::bad_alloc);  // n * 8 overflows
  EXPECT_THROW((void)allocate_large(SIZE_MAX - 5), std::bad_alloc);  // rounding overflows
}

}  // namespace
}  // namespace minfer
