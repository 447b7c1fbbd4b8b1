// Memory for large read-mostly arrays (repacked weights) on transparent huge
// pages where the kernel offers them.
//
// A decode step streams every weight once; on 4 KiB pages that is a TLB miss
// every 4 KiB per thread, which costs a core part of its memory bandwidth.
// LargePageAllocator<T> gives std::vector storage aligned to 2 MiB and marks
// it MADV_HUGEPAGE (Linux; the hint is all "madvise" mode needs). Elsewhere,
// or for arrays under 2 MiB, it is the plain aligned allocation.
//
// Contract: allocate(n) returns storage for n objects of T or throws
// std::bad_alloc like std::allocator; deallocate frees it. The hint's failure
// is ignored (the memory is still valid, only on small pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace minfer {

void* allocate_large(size_t bytes);
void free_large(void* p) noexcept;

template <class T>
struct LargePageAllocator {
  using value_type = T;
  LargePageAllocator() = default;
  template <class U>
  explicit LargePageAllocator(const LargePageAllocator<U>& /*other*/) {}
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(allocate_large(n * sizeof(T)));
  }
  void deallocate(T* p, size_t /*n*/) noexcept { free_large(p); }
  template <class U>
  bool operator==(const LargePageAllocator<U>& /*other*/) const {
    return true;
  }
};

}  // namespace minfer
