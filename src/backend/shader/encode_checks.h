// The argument checks every encoder shares (encoders.h's contract: shapes
// refused, not absorbed; bindings sized), so that each message reads alike:
//   "matmul: n_tokens = 0 (must be in 1..4294967295)"
//   "matmul: x needs 14336 bytes, its binding has 4096".
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "backend/shader/device.h"
#include "base/status.h"

namespace minfer::shader {

// The largest index the kernels' 32-bit arithmetic takes.
inline constexpr int64_t kMaxIndex = std::numeric_limits<uint32_t>::max();

// The bytes a binding offers the kernel: its size, or (size 0) the rest of
// its buffer's capacity; 0 without a buffer.
uint64_t bound_bytes(const BufferRange& r);

// invalid_argument naming `op` and `what` unless `r` has a buffer of at
// least `bytes`.
Status needs(std::string_view op, std::string_view what, const BufferRange& r, uint64_t bytes);

// invalid_argument naming `op` and `what` unless 1 <= v <= kMaxIndex.
Status positive(std::string_view op, std::string_view what, int64_t v);

}  // namespace minfer::shader
