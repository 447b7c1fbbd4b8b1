// The device layer of a command-buffer GPU backend: the small interface that
// a GPU API implements (src/backend/vulkan/, src/backend/metal/) and
// that the shared layer above it (recorder.h: dispatch validation, barriers,
// one submission per split, bounded waits, the kernel trail) drives. What is
// here is only what differs between APIs: memory, pipelines, the encoding of
// one dispatch or barrier, submission and a wait with a deadline.
//
// Contract:
//   - A Device is opened once (vulkan::open_device) with every pipeline of
//     embedded_kernels() created or refused then; kernel(i) says which, and
//     why not. Its DeviceInfo (limits, features) is queried from the device at
//     open, never assumed.
//   - Buffers are device memory the kernels read and write; write_buffer and
//     read_buffer copy between the host and a buffer and return when the copy
//     is complete (through a staging buffer where the memory is not host
//     visible; each wait bounded by timeout_s()). They must not run while a
//     CommandList that touches the buffer is pending.
//   - create_buffer's MemoryUse is a hint: kHostAccess asks for device memory
//     the host maps (a BAR heap, unified memory), so that host copies of it
//     are memcpys with no submission; a device without such memory, or out
//     of it, gives kDevice memory instead (never an error for that reason).
//     Buffer::mapped() says which it got.
//   - A CommandList records dispatches and barriers in order, then submit()
//     hands all of them to the device at once and wait() blocks until they
//     finished or the deadline passed. A list destroyed while its work still
//     runs hands its resources to the device, which frees them once the work
//     is done (never while the device may still use them).
//   - wrap_host_memory (optional) makes a buffer of host memory the device
//     reads in place: the weights over the model file's mapping (weights.h).
//   - Buffers and command lists must be destroyed before the Device that made
//     them; a buffer destroyed while work still runs is freed when it ends.
//   - The device layer trusts its callers for what the shared layer checks
//     (binding counts, push sizes, device limits); it checks every API call
//     and returns its error with the call, the API's result name and file:line.
// Threading: one thread drives a Device and its lists at a time.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace minfer::shader {

// Limits of the device, read from it at open.
struct DeviceLimits {
  std::array<uint32_t, 3> max_workgroup_count{};
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_workgroup_invocations = 0;
  uint64_t max_shared_memory_bytes = 0;
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 1;
  uint32_t max_push_constant_bytes = 0;
  uint32_t subgroup_size = 0;  // the device's (or its default) subgroup size
};

// The feature probe: what the kernels' variants may use here.
struct DeviceFeatures {
  bool storage_buffer_8bit = false;   // 8-bit integers in storage buffers
  bool storage_buffer_16bit = false;  // 16-bit values in storage buffers
  bool shader_float16 = false;        // f16 arithmetic
  bool shader_int8 = false;           // 8-bit integer arithmetic
  bool subgroup_arithmetic = false;   // subgroupAdd & co. in compute shaders
  bool integer_dot_product = false;   // 4x8-bit packed dot products
};

struct DeviceInfo {
  std::string api;                 // "Vulkan 1.3.230"
  std::string name;                // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver;              // "llvmpipe, Mesa 22.3.6"
  std::string type;                // "discrete", "integrated", "virtual", "cpu"
  bool unified_memory = false;     // buffers are host visible: no staging copies
  double timestamp_period_ns = 0;  // one timestamp tick; 0: no timestamps on its queue
  // > 0: wrap_host_memory() takes host ranges aligned to this (the host's
  // page size); 0: it is not available and weights are copied.
  uint64_t host_wrap_alignment = 0;
  DeviceLimits limits;
  DeviceFeatures features;
};

// Whether an embedded kernel has a pipeline on this device.
struct KernelState {
  bool available = false;
  std::string unavailable_reason;  // e.g. "needs StorageBuffer8BitAccess"
  uint64_t shared_bytes = 0;       // its Workgroup memory (spirv_reflect.h)
};

// Where a buffer's memory should be (Device::create_buffer's hint).
enum class MemoryUse : uint8_t {
  // What the kernels read and write at full speed; host copies may go
  // through staging (a submission and a wait each).
  kDevice,
  // Small buffers the host writes or reads every step (inputs, error words,
  // an argmax): device memory the host maps, where the device has it. Host
  // reads of it may be uncached (write-combined BAR memory): keep it small.
  kHostAccess,
};

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual uint64_t size() const = 0;      // as asked for at create_buffer
  virtual uint64_t capacity() const = 0;  // allocated: size() rounded up to 16 bytes
  // True when write_buffer / read_buffer of it are host memcpys (mapped
  // memory: no staging copy, no submission, no wait).
  virtual bool mapped() const { return false; }
};

// A binding of a dispatch: `size` bytes from `offset`; size 0 means to the
// end of the buffer's capacity() (kernels that read whole 32-bit words of a
// byte stream may touch the padding past size()).
struct BufferRange {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct Groups {
  uint32_t x = 1, y = 1, z = 1;
};

using Clock = std::chrono::steady_clock;

class CommandList {
 public:
  virtual ~CommandList() = default;
  // Records a dispatch of embedded kernel `kernel` (an index of
  // embedded_kernels(), available on this device).
  virtual Status dispatch(uint32_t kernel, std::span<const BufferRange> bindings,
                          std::span<const std::byte> push, Groups groups) = 0;
  // Makes every write to `buffers` recorded so far visible to what is
  // recorded after (and orders the two).
  virtual Status barrier(std::span<const Buffer* const> buffers) = 0;
  // Ends the recording and submits it, once.
  virtual Status submit() = 0;
  // True when the submitted work finished, false when `deadline` passed first.
  virtual Result<bool> wait(Clock::time_point deadline) = 0;

  // Replay (optional): submits the same recorded commands again, once the
  // previous submission's wait returned true; then wait() as after submit().
  virtual bool reusable() const { return false; }
  virtual Status resubmit() { return Status::unimplemented("command lists are one-shot here"); }

  // Profiling (optional; devices with DeviceInfo::timestamp_period_ns > 0):
  // records a timestamp taken once every command recorded before it has
  // finished. After a wait that returned true, timestamps() gives them in
  // order, in ticks of timestamp_period_ns.
  virtual Status write_timestamp() { return Status::unimplemented("no GPU timestamps"); }
  virtual Result<std::vector<uint64_t>> timestamps() { return std::vector<uint64_t>{}; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual const KernelState& kernel(uint32_t index) const = 0;
  // The deadline of every wait, in seconds (backend::GpuOptions::gpu_timeout_s).
  virtual double timeout_s() const = 0;

  // A buffer of `bytes` (capacity() rounded up to 16) in memory for `use`
  // (a hint, see above); resource_exhausted when the device is out of memory.
  virtual Result<std::unique_ptr<Buffer>> create_buffer(uint64_t bytes, MemoryUse use) = 0;
  Result<std::unique_ptr<Buffer>> create_buffer(uint64_t bytes) {
    return create_buffer(bytes, MemoryUse::kDevice);
  }
  virtual Status write_buffer(const Buffer& buffer, uint64_t offset,
                              std::span<const std::byte> src) = 0;
  virtual Status read_buffer(const Buffer& buffer, uint64_t offset, std::span<std::byte> dst) = 0;
  virtual Result<std::unique_ptr<CommandList>> begin_commands() = 0;

  // Zero-copy (optional; devices with DeviceInfo::host_wrap_alignment > 0,
  // unified memory): a buffer over `bytes` of host memory, without a copy,
  // for kernels that only read it. bytes.data() and bytes.size() are
  // multiples of host_wrap_alignment; the caller keeps the memory mapped and
  // unchanged for as long as the buffer lives. write_buffer to it is not
  // allowed.
  virtual Result<std::unique_ptr<Buffer>> wrap_host_memory(std::span<const std::byte> bytes) {
    return Status::unimplemented("this device cannot wrap host memory");
  }
};

}  // namespace minfer::shader
