// The Vulkan device layer: opens a shader::Device (backend/shader/device.h) on a
// Vulkan 1.2+ device. The shared GPU layer (backend/shader/recorder.h) drives it.
//
// Contract:
//   - open_device() creates the instance (no layers, unless
//     MINFER_VULKAN_VALIDATION=1 and VK_LAYER_KHRONOS_validation is installed:
//     its messages then go to the log sink), picks the physical device
//     (MINFER_VULKAN_DEVICE=N, else the best of discrete > integrated >
//     virtual > cpu that has Vulkan 1.2 and a compute queue), creates one
//     compute queue, probes features (8/16-bit storage, f16 and int8
//     arithmetic, subgroup arithmetic, integer dot product, push
//     descriptors), queries the limits, and creates the pipeline of every
//     embedded kernel whose SPIR-V capabilities the device has. It logs one
//     line naming the device and driver.
//   - Errors: unavailable when MINFER_DISABLE_VULKAN=1, when there is no
//     loader, no device or no suitable one (the message says which and why);
//     a kernel whose SPIR-V disagrees with its manifest, whose pipeline the
//     driver refuses, or a kernel none of whose variants runs here is an
//     internal error naming it. Every Vulkan call is checked: its error names
//     the call, the VkResult and file:line.
//   - Memory: where the device is integrated or a CPU and offers
//     device-local, host-visible, coherent memory (lavapipe, Apple, APUs),
//     buffers are mapped and host copies are memcpy; otherwise buffers are
//     device-local and host copies go through a staging buffer, each copy
//     waited for with the deadline, except MemoryUse::kHostAccess buffers
//     where the device has device-local memory the host can map (NVIDIA's
//     BAR heap): those are mapped too, and fall back to device-local memory
//     when the type is absent or its heap is full.
//   - Waits poll their fence for up to 2 ms (config.fence_spin_s; not on CPU
//     devices, whose threads the poll would compete with) before blocking,
//     never past the deadline.
//   - Descriptors: push descriptors (VK_KHR_push_descriptor) where the
//     device has them and config.allow_push_descriptors, else sets from
//     descriptor pools owned by each command list.
// Threading: as shader::Device.
#pragma once

#include <memory>

#include "backend/shader/device.h"
#include "base/options.h"
#include "base/status.h"

namespace minfer::vulkan {

struct OpenConfig {
  bool test_kernels = false;           // also create the test-only kernels (spin)
  bool allow_push_descriptors = true;  // false: descriptor pools even where push exists
  bool quiet = false;                  // no startup line
  // Without MINFER_VULKAN_DEVICE, a best device that runs on the CPU
  // (lavapipe) is unavailable, refused before any pipeline is made.
  bool refuse_cpu_device = false;
  // Tests: false takes the discrete GPU's memory paths on a unified device
  // (lavapipe): buffers are not mapped and host copies go through staging.
  bool allow_unified_memory = true;
  // Tests: false makes MemoryUse::kHostAccess fall back to device-local
  // memory, as on a device without host-visible device memory.
  bool allow_host_access_memory = true;
  // Tests: how long a wait polls its fence before blocking, in seconds;
  // negative: the default (2 ms; none on a CPU device).
  double fence_spin_s = -1;
};

Result<std::unique_ptr<shader::Device>> open_device(const Options& options,
                                                    const OpenConfig& config = {});

}  // namespace minfer::vulkan
