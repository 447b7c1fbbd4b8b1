#include "backend/cuda/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend/cuda/cuda_options.h"
#include "base/log.h"

namespace minfer::cuda {
namespace {

struct DeviceState {
  Device device;
  bool ok = false;
  std::string reason;
};

}  // namespace

Status cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  // Out of memory may pass with less (a smaller context); anything else is a bug or a device fault.
  const StatusCode code =
      err == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status::error(code, std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                                 cudaGetErrorString(err) + ") in " + what + " at " +
                                 (base != nullptr ? base + 1 : file) + ":" + std::to_string(line));
}

// Initialization of the process's device (a friend of Device).
struct DeviceInit {
  static Status init(DeviceState& st) {
    const CudaOptions& options = process_section<CudaOptions>();
    if (options.disable_cuda) return Status::unavailable("disabled by MINFER_DISABLE_CUDA");
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      (void)cudaGetLastError();  // clear the sticky-free error
      return Status::unavailable(err != cudaSuccess ? std::string("no CUDA device (") +
                                                          cudaGetErrorString(err) + ")"
                                                    : std::string("no CUDA device"));
    }
    const int ordinal = options.cuda_device;
    if (ordinal >= count) {
      return Status::unavailable("MINFER_CUDA_DEVICE=" + std::to_string(ordinal) + " but " +
                                 std::to_string(count) + " device(s) present");
    }
    MINFER_CUDA_CHECK(cudaSetDevice(ordinal));
    cudaDeviceProp prop{};
    MINFER_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    DeviceLimits& l = st.device.limits_;
    l.ordinal = ordinal;
    l.name = prop.name;
    l.cc_major = prop.major;
    l.cc_minor = prop.minor;
    l.sm_count = prop.multiProcessorCount;
    l.max_threads_per_block = prop.maxThreadsPerBlock;
    l.shared_per_block = prop.sharedMemPerBlock;
    l.shared_per_block_optin = prop.sharedMemPerBlockOptin;
    l.warp_size = prop.warpSize;
    l.total_memory = prop.totalGlobalMem;
    if (l.warp_size != 32) {
      return Status::unavailable("warp size " + std::to_string(l.warp_size) + " (kernels need 32)");
    }
    // The kernels' needs: blocks of up to 512 threads (attention) and up to
    // 17 KiB of static shared memory per block (matmul tiles, attention).
    constexpr int kThreadsNeeded = 512;
    constexpr size_t kSharedNeeded = 32 * 1024;
    if (l.max_threads_per_block < kThreadsNeeded || l.shared_per_block < kSharedNeeded) {
      return Status::unavailable(
          "device limits below the kernels' needs: " + std::to_string(l.max_threads_per_block) +
          " threads per block (need " + std::to_string(kThreadsNeeded) + "), " +
          std::to_string(l.shared_per_block) + " bytes of shared memory (need " +
          std::to_string(kSharedNeeded) + ")");
    }
    // Create the context now, so that its cost is not paid by the first kernel.
    MINFER_CUDA_CHECK(cudaFree(nullptr));
    char line[256];
    std::snprintf(line, sizeof(line),
                  "CUDA device %d: %s (compute %d.%d, %d SMs, %.1f GiB, %zu KiB shared "
                  "per block, %zu KiB opt-in)",
                  ordinal, l.name.c_str(), l.cc_major, l.cc_minor, l.sm_count,
                  static_cast<double>(l.total_memory) / (1024.0 * 1024.0 * 1024.0),
                  l.shared_per_block / 1024, l.shared_per_block_optin / 1024);
    log_info(line);
    return Status::ok();
  }
};

namespace {

DeviceState& state() {
  static DeviceState st;
  static std::once_flag once;
  std::call_once(once, [] {
    Status s = DeviceInit::init(st);
    st.ok = s.is_ok();
    if (!s.is_ok()) st.reason = s.message();
  });
  return st;
}

}  // namespace

const Device* Device::get() {
  DeviceState& st = state();
  return st.ok ? &st.device : nullptr;
}

const std::string& Device::unavailable_reason() {
  return state().reason;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  const size_t n = bytes == 0 ? 1 : bytes;
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::resource_exhausted("cudaMalloc of " + std::to_string(bytes) +
                                      " bytes failed: " + cudaGetErrorString(err));
  }
  b.ptr_ = p;
  b.size_ = bytes;
  return Result<DeviceBuffer>(std::move(b));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

Result<PinnedBuffer> PinnedBuffer::allocate(size_t bytes) {
  PinnedBuffer b;
  const size_t n = bytes == 0 ? 1 : bytes;
  void* p = nullptr;
  const cudaError_t err = cudaMallocHost(&p, n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::resource_exhausted("cudaMallocHost of " + std::to_string(bytes) +
                                      " bytes failed: " + cudaGetErrorString(err));
  }
  b.ptr_ = p;
  b.size_ = bytes;
  return Result<PinnedBuffer>(std::move(b));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void PinnedBuffer::reset() {
  if (ptr_ != nullptr) (void)cudaFreeHost(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

Result<Stream> Stream::create() {
  Stream s;
  MINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking));
  return Result<Stream>(std::move(s));
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_ != nullptr) (void)cudaStreamDestroy(s_);
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (s_ != nullptr) (void)cudaStreamDestroy(s_);
}

Result<Event> Event::create() {
  Event e;
  MINFER_CUDA_CHECK(cudaEventCreateWithFlags(&e.e_, cudaEventDisableTiming));
  return Result<Event>(std::move(e));
}

Result<Event> Event::create_timed() {
  Event e;
  MINFER_CUDA_CHECK(cudaEventCreate(&e.e_));
  return Result<Event>(std::move(e));
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
    e_ = o.e_;
    o.e_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (e_ != nullptr) (void)cudaEventDestroy(e_);
}

}  // namespace minfer::cuda
