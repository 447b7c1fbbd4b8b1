// Device-limit guards of the shared GPU layer: a dispatch that would pass a
// limit of the device is refused with the actual numbers, never clamped or
// split behind the caller's back (docs/ARCHITECTURE.md, "Contracts" 6).
//
// Contract:
//   - check_kernel_fits(): the kernel's workgroup (each dimension and the
//     invocation count), its shared memory and its push-constant size against
//     the device's limits. Used when pipelines are created, and again per
//     dispatch by check_dispatch().
//   - check_dispatch(): that, plus the binding count and the push size against
//     the kernel table, the group counts (each > 0 and within
//     maxComputeWorkGroupCount), and each binding (a buffer, an offset
//     aligned to minStorageBufferOffsetAlignment, a range within the buffer
//     and within maxStorageBufferRange). Errors are out_of_range for a limit,
//     invalid_argument for a malformed call, and name the kernel.
//   - fold_groups(n, limits): a grid of n workgroups as x * y with
//     x <= maxComputeWorkGroupCount[0], for kernels that index
//     folded_group_index() (kernels/common.glsl); x * y >= n, the kernel
//     checks its own bound. An n past x_max * y_max is out_of_range.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/shader/device.h"
#include "backend/shader/kernel_table.h"
#include "base/status.h"

namespace minfer::shader {

Status check_kernel_fits(const DeviceLimits& limits, const KernelInfo& kernel,
                         uint64_t shared_bytes);

Status check_dispatch(const DeviceLimits& limits, const KernelInfo& kernel,
                      const KernelState& state, std::span<const BufferRange> bindings,
                      size_t push_bytes, Groups groups);

Result<Groups> fold_groups(uint64_t n, const DeviceLimits& limits);

}  // namespace minfer::shader
