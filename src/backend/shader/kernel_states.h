// Which embedded kernels a device runs, decided the same way by every device
// layer before it creates pipelines: each module's SPIR-V is read
// (spirv_reflect.h) and checked against its manifest entry, then against the
// device's features and limits.
//
// Contract:
//   - assess_kernel() returns the kernel's state on a device with `info`:
//     available when the device has every SPIR-V capability the module
//     declares and the kernel fits its limits (the layer then creates its
//     pipeline), else unavailable with the reason ("needs
//     StorageBuffer8BitAccess", a limit with its numbers, "a test-only
//     kernel ..."). A module that disagrees with its manifest (LocalSize, a
//     binding past the declared ones, the push-constant size) or does not
//     parse is an internal error naming the kernel: a broken build.
//   - device_has() is the capability -> feature map used for that; a
//     capability it does not know is never assumed.
//   - check_every_kernel_has_a_variant() is ok when every non-test kernel has
//     at least one available variant in `states` (indexed as
//     embedded_kernels()), else internal naming the kernel, the device and
//     why each variant was refused.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backend/shader/device.h"
#include "backend/shader/kernel_table.h"
#include "base/status.h"

namespace minfer::shader {

bool device_has(const DeviceFeatures& features, uint32_t capability);

Result<KernelState> assess_kernel(const KernelInfo& kernel, const DeviceInfo& info,
                                  bool test_kernels);

Status check_every_kernel_has_a_variant(std::span<const KernelState> states,
                                        std::string_view device_name);

}  // namespace minfer::shader
