// The Metal device layer: a shader::Device (backend/shader/device.h) on the
// system's default Metal device, driven by the shared GPU layer like the
// Vulkan one. The only Apple-specific code of the Metal backend is this
// layer (metal_device.mm, metal_pipelines.mm); what it runs is the shared
// layer's, and its kernels are the GLSL ones as MSL (msl_abi.h).
//
// Contract:
//   - open_metal_device() takes MTLCreateSystemDefaultDevice() and one
//     command queue, queries its limits (maxThreadgroupMemoryLength,
//     maxThreadsPerThreadgroup, maxBufferLength) and features (simd-group
//     reductions from its GPU family), and creates every pipeline at open
//     (metal_pipelines.mm): from minfer.metallib when one is found
//     (MINFER_METALLIB_FILE, else the build's), else by compiling the
//     embedded MSL (embedded_msl.h). Each kernel's sidecar is checked
//     against the kernel table first (msl_abi.h); a kernel whose function
//     is missing, or that fails to compile or to make a pipeline, is an
//     internal startup error that names it. It logs "Metal: using <device>
//     (unified memory: yes)".
//   - Errors: unavailable when MINFER_DISABLE_METAL (or MINFER_DISABLE_MPS)
//     is set, when there is no Metal device, or when the device has no
//     unified memory (the backend relies on it: every buffer is shared
//     storage, and host copies are memcpys).
//   - Buffers: MTLResourceStorageModeShared (mapped() is true; write_buffer
//     and read_buffer are memcpys of contents()); wrap_host_memory is
//     newBufferWithBytesNoCopy over page-aligned host memory (the mapped
//     model file) with DeviceInfo::host_wrap_alignment = the page size.
//   - A CommandList is one MTLCommandBuffer with one concurrent compute
//     encoder: dispatch sets the pipeline, binding i at buffer index i, the
//     arguments with setBytes at kMslArgsSlot, and dispatches threadgroups
//     of the manifest's workgroup; barrier() is memoryBarrierWithResources
//     on the buffers named. submit() ends the encoding and commits with a
//     completion handler that signals a dispatch semaphore; wait() waits on
//     it until the deadline and then checks the command buffer's status (an
//     error carries the command buffer's own error text).
// Built only on Apple platforms (MINFER_METAL). Threading: as shader::Device.
#pragma once

#include <memory>

#include "backend/shader/device.h"
#include "base/options.h"
#include "base/status.h"

namespace minfer::metal {

struct MetalOpenConfig {
  bool test_kernels = false;  // also create the test-only kernels (spin)
  bool quiet = false;         // no startup line
};

Result<std::unique_ptr<shader::Device>> open_metal_device(const Options& options,
                                                          const MetalOpenConfig& config = {});

}  // namespace minfer::metal
