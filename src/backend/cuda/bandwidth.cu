// CudaBackend::memory_bandwidth_gbs: the device's memory bandwidth as a
// device-to-device copy moves it, the denominator of a decode roofline on the
// GPU (a host-memory probe there printed rooflines of 1180-1720 %).
//
// A copy of B bytes reads B and writes B, so it moves 2B (the measured rate:
// docs/PERFORMANCE.md, "How minfer bench measures"). 256 MiB per copy
// is far beyond the L2 cache (50 MiB on an H200); when the model leaves too little device memory
// free, smaller copies (down to 32 MiB) are used instead.
#include <algorithm>
#include <optional>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/device.h"

namespace minfer::cuda::detail {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kLargestCopy = 256 * kMiB;
constexpr size_t kSmallestCopy = 32 * kMiB;
constexpr int kTimedCopies = 5;

struct CopyBuffers {
  DeviceBuffer src, dst;
};

// Two buffers of the largest size that fits, halving from kLargestCopy.
Result<CopyBuffers> copy_buffers(size_t bytes = kLargestCopy) {
  auto src = DeviceBuffer::allocate(bytes);
  auto dst = src.is_ok() ? DeviceBuffer::allocate(bytes) : Result<DeviceBuffer>(src.status());
  if (src.is_ok() && dst.is_ok())
    return CopyBuffers{std::move(src).value(), std::move(dst).value()};
  if (bytes / 2 >= kSmallestCopy) return copy_buffers(bytes / 2);
  return dst.status().with_context("CUDA bandwidth probe");
}

}  // namespace

Result<std::optional<double>> CudaBackend::memory_bandwidth_gbs() {
  MINFER_RETURN_IF_ERROR(synchronize());  // earlier work must not land in the timed copies
  MINFER_ASSIGN_OR_RETURN(CopyBuffers buf, copy_buffers());
  MINFER_ASSIGN_OR_RETURN(Event start, Event::create_timed());
  MINFER_ASSIGN_OR_RETURN(Event stop, Event::create_timed());
  const size_t bytes = buf.src.size();
  cudaStream_t s = stream_.get();
  MINFER_CUDA_CHECK(cudaMemsetAsync(buf.src.data(), 1, bytes, s));
  // One untimed copy first: the first touch of fresh allocations maps their pages.
  MINFER_CUDA_CHECK(
      cudaMemcpyAsync(buf.dst.data(), buf.src.data(), bytes, cudaMemcpyDeviceToDevice, s));
  double best = 0.0;
  for (int i = 0; i < kTimedCopies; ++i) {
    MINFER_CUDA_CHECK(cudaEventRecord(start.get(), s));
    MINFER_CUDA_CHECK(
        cudaMemcpyAsync(buf.dst.data(), buf.src.data(), bytes, cudaMemcpyDeviceToDevice, s));
    MINFER_CUDA_CHECK(cudaEventRecord(stop.get(), s));
    MINFER_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    MINFER_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (ms > 0.0f) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  if (!(best > 0.0)) return Status::internal("CUDA bandwidth probe: no copy took measurable time");
  return std::optional<double>(best);
}

}  // namespace minfer::cuda::detail
