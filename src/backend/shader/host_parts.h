// The parts of host memory a unified-memory GPU wraps without copying
// (Device::wrap_host_memory): the model's tensors lie in the mapped GGUF
// file, and each part is a page-aligned range of it that one buffer covers,
// so every tensor is (part buffer, offset) and nothing is copied.
//
// Contract:
//   - plan_host_parts() takes the tensors' host ranges [begin, end) (in
//     any order, possibly touching or sharing pages), the page size (a power
//     of two) and the largest buffer the device makes, and returns parts
//     with begin and end on page boundaries, in address order, none longer
//     than max_bytes, and for each range the index of the part that holds it
//     whole (kNoPart for an empty range or one that no part of max_bytes can
//     hold once its ends are rounded to pages: those are copied instead).
//   - Ranges whose pages (the ends rounded out) touch or overlap share a part
//     while it stays within max_bytes; untouched pages between two ranges
//     start a new part, so a part never covers memory between two distant
//     allocations. Parts may overlap where a range did not fit the one before.
// Threading: pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace minfer::shader {

struct HostRange {
  uintptr_t begin = 0, end = 0;
};

struct HostPartPlan {
  static constexpr size_t kNoPart = static_cast<size_t>(-1);
  std::vector<HostRange> parts;
  std::vector<size_t> part_of;  // per input range: an index of parts, or kNoPart
};

HostPartPlan plan_host_parts(std::span<const HostRange> ranges, uint64_t page, uint64_t max_bytes);

}  // namespace minfer::shader
