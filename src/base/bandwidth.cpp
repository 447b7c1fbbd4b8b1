#include "base/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace minfer {
namespace {

// Sums a range with four independent accumulators so the loop is bound by
// loads, not by the add latency chain.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

}  // namespace

Result<double> measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  constexpr size_t kMinBytes = size_t{1} << 20;
  if (bytes < kMinBytes || passes < 1) {
    return Status::internal("bandwidth test: buffer of " + std::to_string(bytes) + " bytes and " +
                            std::to_string(passes) + " passes (need >= 1 MiB and >= 1 pass)");
  }
  const size_t words = bytes / 64 * 8;
  std::unique_ptr<uint64_t[]> buf(new (std::nothrow) uint64_t[words]);
  if (!buf)
    return Status::internal("bandwidth test: cannot allocate " + std::to_string(bytes) + " bytes");
  // Touch every page from the pool's threads so the pages are really mapped.
  const int64_t chunks = static_cast<int64_t>(pool.num_threads()) * 64;
  const size_t per_chunk = (words + static_cast<size_t>(chunks) - 1) / static_cast<size_t>(chunks);
  auto range = [&](int64_t c) {
    const size_t begin = std::min(words, static_cast<size_t>(c) * per_chunk);
    return std::pair<size_t, size_t>(begin, std::min(words, begin + per_chunk));
  };
  pool.parallel_for(chunks, [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; ++c) {
      auto [lo, hi] = range(c);
      for (size_t i = lo; i < hi; ++i) buf[i] = i;
    }
  });
  // The sums go to an atomic, so the reads cannot be optimized away.
  std::atomic<uint64_t> sink{0};
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(chunks, [&](int64_t b, int64_t e, int) {
      uint64_t s = 0;
      for (int64_t c = b; c < e; ++c) {
        auto [lo, hi] = range(c);
        s += sum_words(buf.get() + lo, hi - lo);
      }
      sink.fetch_add(s, std::memory_order_relaxed);
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sec > 0) best = std::max(best, static_cast<double>(words * 8) / sec / 1e9);
  }
  return best;
}

}  // namespace minfer
