#include "base/large_pages.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace minfer {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kCacheLine = 64;
}  // namespace

void* allocate_large(size_t bytes) {
  const size_t align = bytes >= kHugePage ? kHugePage : kCacheLine;
  if (bytes > SIZE_MAX - align) throw std::bad_alloc();
  const size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHugePage) (void)::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

void free_large(void* p) noexcept {
  std::free(p);
}

}  // namespace minfer
