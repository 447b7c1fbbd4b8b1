// The CUDA device layer: device selection, queried limits, checked calls and
// RAII owners for device memory, streams and events.
//
// Contract:
//   - Device::get() selects the device once per process (device 0, or
//     MINFER_CUDA_DEVICE), queries its limits and prints the device in use to
//     stderr. It is null when the process has no usable CUDA device, when
//     MINFER_DISABLE_CUDA=1, or when initialization failed; unavailable_reason()
//     then says why. Limits are read from the device, never assumed.
//   - MINFER_CUDA_CHECK(expr) evaluates a CUDA runtime call and returns an
//     error Status naming the call, the CUDA error and file:line.
//   - DeviceBuffer / PinnedBuffer / Stream / Event own their handle and
//     release it in the destructor (errors while releasing are ignored:
//     nothing to report to).
// Include only from .cu files (it pulls in the CUDA runtime headers).
// Threading: Device is immutable after get(); the RAII owners are not shared.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "base/status.h"

namespace minfer::cuda {

Status cuda_error(cudaError_t err, const char* what, const char* file, int line);

#define MINFER_CUDA_CHECK(expr)                                                       \
  do {                                                                                \
    const cudaError_t minfer_cuda_err_ = (expr);                                      \
    if (minfer_cuda_err_ != cudaSuccess) {                                            \
      return ::minfer::cuda::cuda_error(minfer_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

struct DeviceLimits {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0;
  size_t shared_per_block = 0;        // default (static) limit per block
  size_t shared_per_block_optin = 0;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int warp_size = 0;
  size_t total_memory = 0;
};

struct DeviceInit;

class Device {
 public:
  // The process's device, or null (see unavailable_reason()).
  static const Device* get();
  static const std::string& unavailable_reason();

  const DeviceLimits& limits() const { return limits_; }

 private:
  friend struct DeviceInit;
  DeviceLimits limits_;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) {
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void reset();
  void* data() const { return ptr_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory (cudaMallocHost): the source of asynchronous
// host-to-device copies. allocate() fails (with the CUDA error) rather than
// falling back to pageable memory; the caller decides what to do instead.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static Result<PinnedBuffer> allocate(size_t bytes);
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) {
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { reset(); }

  void reset();
  void* data() const { return ptr_; }
  size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

class Stream {
 public:
  Stream() = default;
  static Result<Stream> create();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  static Result<Event> create();        // timing disabled: cheapest to poll
  static Result<Event> create_timed();  // for cudaEventElapsedTime
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace minfer::cuda
