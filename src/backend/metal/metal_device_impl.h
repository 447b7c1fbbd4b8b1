// The Objective-C++ classes of the Metal device layer (metal_device.h),
// shared by metal_device.mm (buffers, command lists, the device) and
// metal_pipelines.mm (the kernel library and pipelines). Included only from
// Objective-C++ (.mm) files compiled with ARC.
#pragma once

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/metal/metal_device.h"

namespace minfer::metal::detail {

class MetalBuffer final : public shader::Buffer {
 public:
  MetalBuffer(id<MTLBuffer> buffer, uint64_t size, bool wraps_host)
      : buffer_(buffer), size_(size), wraps_host_(wraps_host) {}
  uint64_t size() const override { return size_; }
  uint64_t capacity() const override { return [buffer_ length]; }
  bool mapped() const override { return true; }
  id<MTLBuffer> buffer() const { return buffer_; }
  std::byte* contents() const { return static_cast<std::byte*>([buffer_ contents]); }
  bool wraps_host() const { return wraps_host_; }

 private:
  id<MTLBuffer> buffer_;
  uint64_t size_;
  bool wraps_host_;
};

class MetalDevice final : public shader::Device {
 public:
  MetalDevice(id<MTLDevice> device, id<MTLCommandQueue> queue, double timeout_s)
      : device_(device), queue_(queue), timeout_s_(timeout_s) {}

  const shader::DeviceInfo& info() const override { return info_; }
  const shader::KernelState& kernel(uint32_t index) const override { return kernels_[index]; }
  double timeout_s() const override { return timeout_s_; }
  using shader::Device::create_buffer;
  Result<std::unique_ptr<shader::Buffer>> create_buffer(uint64_t bytes,
                                                        shader::MemoryUse use) override;
  Status write_buffer(const shader::Buffer& buffer, uint64_t offset,
                      std::span<const std::byte> src) override;
  Status read_buffer(const shader::Buffer& buffer, uint64_t offset,
                     std::span<std::byte> dst) override;
  Result<std::unique_ptr<shader::CommandList>> begin_commands() override;
  Result<std::unique_ptr<shader::Buffer>> wrap_host_memory(
      std::span<const std::byte> bytes) override;

  // metal_device.mm: the limits and features, read from the device.
  void query_info();
  // metal_pipelines.mm: every kernel's state and pipeline.
  Status create_pipelines(const Options& options, const MetalOpenConfig& config);

  id<MTLComputePipelineState> pipeline(uint32_t index) const { return pipelines_[index]; }
  // The buffer as this device's, or an error for another device's.
  Result<const MetalBuffer*> own(const shader::Buffer* buffer) const;

 private:
  Result<id<MTLLibrary>> prebuilt_library(const Options& options) const;
  Result<id<MTLFunction>> function_of(uint32_t index, id<MTLLibrary> prebuilt) const;

  id<MTLDevice> device_;
  id<MTLCommandQueue> queue_;
  double timeout_s_;
  shader::DeviceInfo info_;
  std::vector<shader::KernelState> kernels_;
  std::vector<id<MTLComputePipelineState>> pipelines_;
};

// An Objective-C error's text, or `fallback` when there is none.
std::string error_text(NSError* error, const char* fallback);

}  // namespace minfer::metal::detail
