// The software prefetch of the CPU expert kernels (moe_kquant_vnni.cpp,
// moe_mxfp4_vnni.cpp). A kernel pass reads a few adjacent weight rows
// interleaved, block by block, which the hardware prefetchers do not follow
// from DRAM; the expert's rows are contiguous, so the pass's reading
// position moves linearly through its bytes and the prefetch runs a fixed
// distance ahead of it (docs/PERFORMANCE.md, "Mixture of experts").
//
// Contract: ExpertPrefetch{first, end} covers the bytes [first, end) of one
// expert (end: past its last row); upto(pos) fetches every line from the
// last one fetched up to pos + kExpertPrefetchBytes, never at or past end.
// Prefetching reads nothing a kernel computes with, so it changes no bit.
// x86-64 only.
// Threading: one per thread and tile call.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace minfer::cpu {

// How far ahead of the reading the prefetch runs, in bytes.
constexpr size_t kExpertPrefetchBytes = 4096;

struct ExpertPrefetch {
  uintptr_t line;  // the next line to fetch
  uintptr_t end;   // the expert's end

  // From the line holding `first`, with the first kExpertPrefetchBytes
  // fetched at once.
  static ExpertPrefetch start(const uint8_t* first, const uint8_t* expert_end) {
    const auto a = reinterpret_cast<uintptr_t>(first);
    ExpertPrefetch p{a & ~uintptr_t{63}, reinterpret_cast<uintptr_t>(expert_end)};
    p.upto(a);
    return p;
  }

  __attribute__((always_inline)) void upto(uintptr_t read_pos) {
    const uintptr_t target = std::min(end, read_pos + kExpertPrefetchBytes);
    for (; line < target; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    }
  }
};

}  // namespace minfer::cpu
