// The Vulkan backend kind of the registry (backend/registry.h): the device
// the process shares and the backend over it (shader/shader_backend.h).
//
// Contract:
//   - unavailable_reason(options) is "" when a Vulkan device can run here,
//     else why not: MINFER_DISABLE_VULKAN, no loader or driver, no suitable
//     device (vulkan_device.h), or a CPU device (lavapipe) that was not asked
//     for: a CPU Vulkan device is only used when MINFER_VULKAN_DEVICE names
//     it, since the CPU backend is faster on the same cores.
//   - The device is opened once per process for a given (device, validation)
//     choice and shared by every backend made from it; it stays open until
//     the process ends.
//   - create_backend() makes the GPU backend "Vulkan" over that device,
//     uploading every weight; device_info() describes the device.
// Threading: unavailable_reason and create_backend may be called from any
// thread; the device cache is locked.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/shader/device.h"
#include "base/options.h"
#include "base/status.h"
#include "model/weights.h"

namespace minfer::vulkan {

std::string unavailable_reason(const Options& options);

// The device's opening status: ok, unavailable (the reasons above), or the
// error that opening it met (a kernel the driver refused, say). A kind whose
// device failed that way is not "unavailable": create_backend() returns the
// error, so that the runner reports it instead of quietly running elsewhere.
Status device_status(const Options& options);

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options);

// The shared device's description (its limits among them), or why it cannot
// be opened.
Result<shader::DeviceInfo> device_info(const Options& options);

}  // namespace minfer::vulkan
