// A shader::Device in host memory for the pool and weights tests: buffers are
// byte vectors, made-up limits, an optional memory budget past which
// create_buffer is resource_exhausted (as a device out of memory), a memory
// layout (unified, or discrete with or without mapped memory for
// MemoryUse::kHostAccess), and no command lists. Lets tests reach limits and
// layouts lavapipe does not have.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/shader/device.h"

namespace minfer::vulkan::testing {

class FakeBuffer final : public shader::Buffer {
 public:
  FakeBuffer(uint64_t bytes, bool mapped)
      : bytes_(bytes), mapped_(mapped), data_((bytes + 15) / 16 * 16) {}
  // A view of host memory (FakeDevice::wrap_host_memory).
  explicit FakeBuffer(std::span<const std::byte> host)
      : bytes_(host.size()), mapped_(true), view_(host.data()) {}
  uint64_t size() const override { return bytes_; }
  uint64_t capacity() const override { return view_ ? bytes_ : data_.size(); }
  bool mapped() const override { return mapped_; }
  std::byte* bytes() const { return data_.data(); }  // nullptr for a view
  const std::byte* read_bytes() const { return view_ ? view_ : data_.data(); }
  const std::byte* view() const { return view_; }

 private:
  uint64_t bytes_;
  bool mapped_;
  mutable std::vector<std::byte> data_;
  const std::byte* view_ = nullptr;
};

// Where a fake device's buffers are: every one mapped (unified), or only
// kHostAccess ones (a discrete GPU with a BAR heap), or none.
enum class FakeMemory { kUnified, kDiscreteWithBar, kDiscrete };

class FakeDevice final : public shader::Device {
 public:
  FakeDevice(uint64_t max_range, uint64_t alignment, uint64_t budget,
             FakeMemory memory = FakeMemory::kUnified)
      : budget_(budget), memory_(memory) {
    info_.name = "fake device";
    info_.unified_memory = memory == FakeMemory::kUnified;
    info_.limits.max_storage_buffer_range = max_range;
    info_.limits.min_storage_buffer_offset_alignment = alignment;
  }
  const shader::DeviceInfo& info() const override { return info_; }
  const shader::KernelState& kernel(uint32_t) const override { return state_; }
  double timeout_s() const override { return 1; }
  using shader::Device::create_buffer;
  Result<std::unique_ptr<shader::Buffer>> create_buffer(uint64_t bytes,
                                                        shader::MemoryUse use) override {
    if (bytes > budget_ - used_) {
      return Status::resource_exhausted("fake: out of device memory for " + std::to_string(bytes) +
                                        " bytes");
    }
    used_ += bytes;
    ++created_;
    if (use == shader::MemoryUse::kHostAccess) ++created_for_host_;
    const bool mapped =
        memory_ == FakeMemory::kUnified ||
        (memory_ == FakeMemory::kDiscreteWithBar && use == shader::MemoryUse::kHostAccess);
    return std::unique_ptr<shader::Buffer>(std::make_unique<FakeBuffer>(bytes, mapped));
  }
  Status write_buffer(const shader::Buffer& b, uint64_t offset,
                      std::span<const std::byte> src) override {
    if (offset + src.size() > b.size()) return Status::invalid_argument("fake: write past the end");
    const auto& fb = static_cast<const FakeBuffer&>(b);
    if (fb.view()) return Status::invalid_argument("fake: a write to wrapped host memory");
    std::memcpy(fb.bytes() + offset, src.data(), src.size());
    return Status::ok();
  }
  Status read_buffer(const shader::Buffer& b, uint64_t offset, std::span<std::byte> dst) override {
    if (offset + dst.size() > b.size()) return Status::invalid_argument("fake: read past the end");
    std::memcpy(dst.data(), static_cast<const FakeBuffer&>(b).read_bytes() + offset, dst.size());
    return Status::ok();
  }
  // Zero-copy like a unified-memory device, once allow_wrap() set a page size.
  void allow_wrap(uint64_t page) { info_.host_wrap_alignment = page; }
  void refuse_wraps() { refuse_wraps_ = true; }  // as memory the device cannot map
  Result<std::unique_ptr<shader::Buffer>> wrap_host_memory(
      std::span<const std::byte> host) override {
    const uint64_t page = info_.host_wrap_alignment;
    if (page == 0) return shader::Device::wrap_host_memory(host);
    if (refuse_wraps_) return Status::resource_exhausted("fake: this memory cannot be wrapped");
    if (reinterpret_cast<uintptr_t>(host.data()) % page != 0 || host.size() % page != 0) {
      return Status::invalid_argument("fake: a wrap not on page boundaries");
    }
    wrapped_.push_back(host);
    return std::unique_ptr<shader::Buffer>(std::make_unique<FakeBuffer>(host));
  }
  const std::vector<std::span<const std::byte>>& wrapped() const { return wrapped_; }
  Result<std::unique_ptr<shader::CommandList>> begin_commands() override {
    return Status::unimplemented("fake: no command lists");
  }
  int created() const { return created_; }
  int created_for_host() const { return created_for_host_; }  // asked with kHostAccess

 private:
  shader::DeviceInfo info_;
  shader::KernelState state_;
  uint64_t budget_, used_ = 0;
  FakeMemory memory_;
  int created_ = 0, created_for_host_ = 0;
  std::vector<std::span<const std::byte>> wrapped_;
  bool refuse_wraps_ = false;
};

}  // namespace minfer::vulkan::testing
