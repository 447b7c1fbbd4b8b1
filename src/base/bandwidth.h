// Measured memory read bandwidth: the denominator of a decode roofline.
//
// Contract: measure_read_bandwidth() streams through a buffer of `bytes`
// (rounded down to 64-byte lines; allocated, touched once, then freed) with
// every thread of `pool`, `passes` times, and returns the best pass in GB/s
// (1e9 bytes per second). Use a buffer much larger than the last-level cache
// (1 GiB by default) or the result measures the cache instead. Errors: bytes
// below 1 MiB, passes < 1, or an allocation failure (messages name the size).
// Threading: uses `pool` exclusively for the duration of the call.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "base/thread_pool.h"

namespace minfer {

Result<double> measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{1} << 30,
                                      int passes = 3);

}  // namespace minfer
