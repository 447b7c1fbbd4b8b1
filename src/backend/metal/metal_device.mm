// The Metal device layer (metal_device.h): buffers, command lists and the
// device. Objective-C++ with ARC: the Metal objects held by the C++ classes
// are released with them.
#include "backend/metal/metal_device_impl.h"

#include <dispatch/dispatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/backend_options.h"
#include "backend/metal/metal_options.h"
#include "backend/metal/msl_abi.h"
#include "backend/shader/kernel_table.h"
#include "base/log.h"

namespace minfer::metal::detail {
namespace {

constexpr uint64_t kOffsetAlignment = 16;  // uvec4 loads: offsets of 16 bytes
constexpr uint32_t kMaxGroups = 65535;     // per dimension, as lavapipe's (fold_groups covers more)
constexpr uint32_t kMaxArgumentBytes = 4096;  // setBytes

class MetalCommandList final : public shader::CommandList {
 public:
  MetalCommandList(const MetalDevice& device, id<MTLCommandBuffer> commands,
                   id<MTLComputeCommandEncoder> encoder)
      : device_(device), commands_(commands), encoder_(encoder) {}
  ~MetalCommandList() override {
    // An encoder must end before its command buffer goes; a submitted buffer
    // keeps itself (and what it uses) alive until the GPU is done with it.
    if (!submitted_) [encoder_ endEncoding];
  }

  Status dispatch(uint32_t kernel, std::span<const shader::BufferRange> bindings,
                  std::span<const std::byte> push, shader::Groups groups) override;
  Status barrier(std::span<const shader::Buffer* const> buffers) override;
  Status submit() override;
  Result<bool> wait(shader::Clock::time_point deadline) override;

 private:
  Status recording(const char* what) const {
    if (!submitted_) return Status::ok();
    return Status::internal(std::string("Metal: ") + what + " after submit()");
  }

  const MetalDevice& device_;
  id<MTLCommandBuffer> commands_;
  id<MTLComputeCommandEncoder> encoder_;
  dispatch_semaphore_t done_ = nullptr;
  bool submitted_ = false;
  bool finished_ = false;
};

Status MetalCommandList::dispatch(uint32_t kernel, std::span<const shader::BufferRange> bindings,
                                  std::span<const std::byte> push, shader::Groups groups) {
  MINFER_RETURN_IF_ERROR(recording("dispatch"));
  const shader::KernelInfo& k = shader::embedded_kernels()[kernel];
  id<MTLComputePipelineState> pipeline = device_.pipeline(kernel);
  if (pipeline == nil) return Status::internal("Metal: " + k.label() + " has no pipeline here");
  [encoder_ setComputePipelineState:pipeline];
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (bindings[i].buffer == nullptr) continue;
    MINFER_ASSIGN_OR_RETURN(const MetalBuffer* b, device_.own(bindings[i].buffer));
    [encoder_ setBuffer:b->buffer() offset:bindings[i].offset atIndex:i];
  }
  if (!push.empty()) [encoder_ setBytes:push.data() length:push.size() atIndex:kMslArgsSlot];
  [encoder_ dispatchThreadgroups:MTLSizeMake(groups.x, groups.y, groups.z)
           threadsPerThreadgroup:MTLSizeMake(k.workgroup[0], k.workgroup[1], k.workgroup[2])];
  return Status::ok();
}

Status MetalCommandList::barrier(std::span<const shader::Buffer* const> buffers) {
  MINFER_RETURN_IF_ERROR(recording("barrier"));
  std::vector<__unsafe_unretained id<MTLResource>> resources;  // the buffers hold them
  for (const shader::Buffer* buffer : buffers) {
    MINFER_ASSIGN_OR_RETURN(const MetalBuffer* b, device_.own(buffer));
    resources.push_back(b->buffer());
  }
  if (resources.empty()) return Status::ok();
  [encoder_ memoryBarrierWithResources:resources.data() count:resources.size()];
  return Status::ok();
}

Status MetalCommandList::submit() {
  MINFER_RETURN_IF_ERROR(recording("submit"));
  [encoder_ endEncoding];
  submitted_ = true;
  done_ = dispatch_semaphore_create(0);
  if (done_ == nullptr) return Status::internal("Metal: dispatch_semaphore_create failed");
  dispatch_semaphore_t done = done_;  // the block keeps its own reference
  [commands_ addCompletedHandler:^(id<MTLCommandBuffer>) {
    dispatch_semaphore_signal(done);
  }];
  [commands_ commit];
  return Status::ok();
}

Result<bool> MetalCommandList::wait(shader::Clock::time_point deadline) {
  if (!submitted_) return Status::internal("Metal: wait() before submit()");
  if (!finished_) {
    const auto left = std::max(deadline - shader::Clock::now(), shader::Clock::duration::zero());
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    if (dispatch_semaphore_wait(done_, dispatch_time(DISPATCH_TIME_NOW, ns)) != 0) return false;
    finished_ = true;
  }
  const MTLCommandBufferStatus status = [commands_ status];
  if (status != MTLCommandBufferStatusCompleted) {
    return Status::internal("Metal: the command buffer ended with status " +
                            std::to_string(static_cast<int>(status)) + ": " +
                            error_text([commands_ error], "no error given"));
  }
  return true;
}

// Whether simd-group reductions (simd_sum & co.) run here: Apple GPU family
// 7 (M1) and later, and the Mac family 2.
bool has_simd_reductions(id<MTLDevice> d) {
  return [d supportsFamily:MTLGPUFamilyApple7] || [d supportsFamily:MTLGPUFamilyMac2];
}

std::string api_name(id<MTLDevice> d) {
  if (@available(macOS 13.0, *)) {
    if ([d supportsFamily:MTLGPUFamilyMetal3]) return "Metal 3";
  }
  return "Metal";
}

}  // namespace

std::string error_text(NSError* error, const char* fallback) {
  if (error == nil) return fallback;
  NSString* text = [error localizedDescription];
  return text != nil ? std::string([text UTF8String]) : std::string(fallback);
}

void MetalDevice::query_info() {
  info_.api = api_name(device_);
  info_.name = [[device_ name] UTF8String];
  info_.driver = std::string("macOS ") +
                 [[[NSProcessInfo processInfo] operatingSystemVersionString] UTF8String];
  info_.unified_memory = [device_ hasUnifiedMemory];
  info_.type = info_.unified_memory ? "integrated" : "discrete";
  info_.timestamp_period_ns = 0;  // no GPU timestamps through this layer yet
  info_.host_wrap_alignment = static_cast<uint64_t>(getpagesize());
  shader::DeviceLimits& l = info_.limits;
  const MTLSize most = [device_ maxThreadsPerThreadgroup];
  l.max_workgroup_count = {kMaxGroups, kMaxGroups, kMaxGroups};
  l.max_workgroup_size = {static_cast<uint32_t>(most.width), static_cast<uint32_t>(most.height),
                          static_cast<uint32_t>(most.depth)};
  l.max_workgroup_invocations = static_cast<uint32_t>(most.width);
  l.max_shared_memory_bytes = [device_ maxThreadgroupMemoryLength];
  l.max_storage_buffer_range = [device_ maxBufferLength];
  l.min_storage_buffer_offset_alignment = kOffsetAlignment;
  l.max_push_constant_bytes = kMaxArgumentBytes;
  l.subgroup_size = 32;  // replaced by the pipelines' threadExecutionWidth
  shader::DeviceFeatures& f = info_.features;
  f.storage_buffer_8bit = f.storage_buffer_16bit = true;
  f.shader_float16 = f.shader_int8 = true;
  f.subgroup_arithmetic = has_simd_reductions(device_);
  f.integer_dot_product = false;
}

Result<const MetalBuffer*> MetalDevice::own(const shader::Buffer* buffer) const {
  const auto* b = dynamic_cast<const MetalBuffer*>(buffer);
  if (b == nullptr) return Status::invalid_argument("Metal: a buffer of another device");
  return b;
}

Result<std::unique_ptr<shader::Buffer>> MetalDevice::create_buffer(uint64_t bytes,
                                                                   shader::MemoryUse) {
  const uint64_t capacity = std::max<uint64_t>((bytes + 15) / 16 * 16, 16);
  id<MTLBuffer> b = [device_ newBufferWithLength:capacity options:MTLResourceStorageModeShared];
  if (b == nil) {
    return Status::resource_exhausted("Metal: newBufferWithLength of " + std::to_string(capacity) +
                                      " bytes failed");
  }
  return std::unique_ptr<shader::Buffer>(std::make_unique<MetalBuffer>(b, bytes, false));
}

Result<std::unique_ptr<shader::Buffer>> MetalDevice::wrap_host_memory(
    std::span<const std::byte> bytes) {
  const uint64_t page = info_.host_wrap_alignment;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % page != 0 || bytes.size() % page != 0 ||
      bytes.empty()) {
    return Status::invalid_argument("Metal: wrap_host_memory of " + std::to_string(bytes.size()) +
                                    " bytes not on " + std::to_string(page) + "-byte pages");
  }
  // The bytes are the caller's (the mapped file): no deallocator.
  id<MTLBuffer> b = [device_ newBufferWithBytesNoCopy:const_cast<std::byte*>(bytes.data())
                                               length:bytes.size()
                                              options:MTLResourceStorageModeShared
                                          deallocator:nil];
  if (b == nil) {
    return Status::resource_exhausted("Metal: newBufferWithBytesNoCopy of " +
                                      std::to_string(bytes.size()) + " bytes failed");
  }
  return std::unique_ptr<shader::Buffer>(std::make_unique<MetalBuffer>(b, bytes.size(), true));
}

Status MetalDevice::write_buffer(const shader::Buffer& buffer, uint64_t offset,
                                 std::span<const std::byte> src) {
  MINFER_ASSIGN_OR_RETURN(const MetalBuffer* b, own(&buffer));
  if (b->wraps_host()) return Status::invalid_argument("Metal: a write to wrapped host memory");
  if (offset > b->capacity() || src.size() > b->capacity() - offset) {
    return Status::out_of_range("Metal: a write of " + std::to_string(src.size()) + " bytes at " +
                                std::to_string(offset) + " past a buffer of " +
                                std::to_string(b->capacity()));
  }
  std::memcpy(b->contents() + offset, src.data(), src.size());
  return Status::ok();
}

Status MetalDevice::read_buffer(const shader::Buffer& buffer, uint64_t offset,
                                std::span<std::byte> dst) {
  MINFER_ASSIGN_OR_RETURN(const MetalBuffer* b, own(&buffer));
  if (offset > b->capacity() || dst.size() > b->capacity() - offset) {
    return Status::out_of_range("Metal: a read of " + std::to_string(dst.size()) + " bytes at " +
                                std::to_string(offset) + " past a buffer of " +
                                std::to_string(b->capacity()));
  }
  std::memcpy(dst.data(), b->contents() + offset, dst.size());
  return Status::ok();
}

Result<std::unique_ptr<shader::CommandList>> MetalDevice::begin_commands() {
  id<MTLCommandBuffer> commands = [queue_ commandBuffer];
  if (commands == nil) return Status::internal("Metal: commandBuffer returned nil");
  id<MTLComputeCommandEncoder> encoder =
      [commands computeCommandEncoderWithDispatchType:MTLDispatchTypeConcurrent];
  if (encoder == nil) return Status::internal("Metal: computeCommandEncoder returned nil");
  return std::unique_ptr<shader::CommandList>(
      std::make_unique<MetalCommandList>(*this, commands, encoder));
}

}  // namespace minfer::metal::detail

namespace minfer::metal {

Result<std::unique_ptr<shader::Device>> open_metal_device(const Options& options,
                                                          const MetalOpenConfig& config) {
  if (options.section<MetalOptions>().disable_metal)
    return Status::unavailable("disabled by MINFER_DISABLE_METAL");
  @autoreleasepool {
    id<MTLDevice> device = MTLCreateSystemDefaultDevice();
    if (device == nil) return Status::unavailable("no Metal device");
    if (![device hasUnifiedMemory]) {
      return Status::unavailable(std::string("Metal: ") + [[device name] UTF8String] +
                                 " has no unified memory (the Metal backend needs Apple silicon)");
    }
    id<MTLCommandQueue> queue = [device newCommandQueue];
    if (queue == nil) return Status::internal("Metal: newCommandQueue returned nil");
    auto d = std::make_unique<detail::MetalDevice>(
        device, queue, options.section<backend::GpuOptions>().gpu_timeout_s);
    d->query_info();
    MINFER_RETURN_IF_ERROR(d->create_pipelines(options, config));
    if (!config.quiet) {
      log_info("Metal: using " + d->info().name + " (unified memory: yes)");
    }
    return std::unique_ptr<shader::Device>(std::move(d));
  }
}

}  // namespace minfer::metal
