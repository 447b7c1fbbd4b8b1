// The weights of a GPU backend in device memory, by GGUF tensor name: each
// tensor uploaded once, packed into large device buffers, found by name for
// binding. API-free (Device::create_buffer / write_buffer only), so a Metal
// device layer reuses it as is.
//
// Contract:
//   - upload() copies a tensor's bytes into the registry's current chunk at an
//     offset aligned to the device's minStorageBufferOffsetAlignment (at least
//     256 bytes), opening a new chunk of max(chunk_bytes, the tensor) when it
//     does not fit. Chunks are capped at maxStorageBufferRange, so one binding
//     sees a whole tensor; a tensor larger than that gets a buffer of its own
//     (the kernels bind weights whole, so op support leaves its nodes to the
//     next backend: ShaderBackend::binds_whole).
//   - The copy goes through Device::write_buffer (staging copies where memory
//     is not host visible, a plain copy on unified memory), in pieces of at
//     most kPieceBytes; `progress(done, total)` is called after each piece with
//     done strictly increasing and ending at total. upload_all() does the same
//     for a list, with total = the bytes of every tensor in it.
//   - A name registers once: a second upload of it is invalid_argument naming
//     the tensor, unless its bytes are the same host pointer and size as the
//     first (then it is a no-op that reports no progress). The bytes must be
//     what type and shape say (row_bytes(type, shape[0]) * the other dims),
//     else invalid_argument naming the tensor. A failed upload registers
//     nothing (its reserved space is lost until the registry dies);
//     upload_all() keeps the tensors before the one that failed.
//   - map_all() (devices with DeviceInfo::host_wrap_alignment > 0: unified
//     memory) registers tensors without copying them: each becomes a view of
//     the host memory it lies in (the mapped model file), through one
//     Device::wrap_host_memory buffer per part of plan_host_parts(); a
//     tensor no part holds, whose part the device refuses to wrap, or whose
//     offset in its part is not a multiple of
//     minStorageBufferOffsetAlignment, is uploaded as by upload_all()
//     instead. Every page of every part is read once (a warm-up: the file is
//     in memory before the first step). The same checks and naming rules apply; the host memory
//     must stay mapped and unchanged while the registry lives. mapped_bytes() is what is registered
//     that way.
//   - lookup() of an unknown name is not_found naming the tensor;
//     all_registered() is ok or not_found naming the missing tensors (the
//     all-weights gate: docs/ARCHITECTURE.md, "Contracts" 2).
//   - The registry must be destroyed before its Device; nothing here may run
//     while recorded work that binds a weight is pending (device.h).
// Threading: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/shader/device.h"
#include "backend/shader/host_parts.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::shader {

struct DeviceWeight {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  quant::TensorType type = quant::TensorType::F32;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the row length

  BufferRange range() const { return {buffer, offset, bytes}; }
};

// One tensor to upload: the host bytes stay owned by the caller and need only
// live until upload returns.
struct HostTensor {
  std::string_view name;
  quant::TensorType type = quant::TensorType::F32;
  std::span<const int64_t> shape;
  std::span<const std::byte> bytes;
};

// The order a GPU backend uploads a model's tensors in: the model's, except
// that each layer's attn_q, attn_k, attn_v weights (and its ffn_gate, ffn_up
// weights) follow one another where the first of them stood, so that they
// usually land back to back in one chunk and a fused kernel binds them as one
// range (see contiguous()).
void order_for_fused_kernels(std::vector<HostTensor>& tensors);

// Whether each weight starts in the same buffer right where the one before it
// ends (false for an empty list or a null entry).
bool contiguous(std::span<const DeviceWeight* const> weights);

// Called with the bytes copied so far and the bytes of the whole upload.
using UploadProgress = std::function<void(uint64_t done, uint64_t total)>;

class WeightsRegistry {
 public:
  static constexpr uint64_t kDefaultChunkBytes = 256ull << 20;
  static constexpr uint64_t kPieceBytes = 16ull << 20;

  explicit WeightsRegistry(Device& device, uint64_t chunk_bytes = kDefaultChunkBytes);
  WeightsRegistry(const WeightsRegistry&) = delete;
  WeightsRegistry& operator=(const WeightsRegistry&) = delete;

  Status upload(const HostTensor& tensor, const UploadProgress& progress = {});
  Status upload_all(std::span<const HostTensor> tensors, const UploadProgress& progress = {});
  Status map_all(std::span<const HostTensor> tensors, const UploadProgress& progress = {});

  bool contains(std::string_view name) const;
  Result<const DeviceWeight*> lookup(std::string_view name) const;
  Status all_registered(std::span<const std::string> names) const;

  uint64_t registered_bytes() const { return registered_bytes_; }  // tensor bytes
  uint64_t device_bytes() const;                                   // chunks held
  uint64_t mapped_bytes() const { return mapped_bytes_; }          // registered as views
  size_t size() const { return index_.size(); }
  uint64_t alignment() const { return alignment_; }

 private:
  struct Entry {
    DeviceWeight weight;
    const std::byte* host = nullptr;  // where the bytes came from (the duplicate check)
  };
  // Whether `t` is already registered: ok(true) for the same bytes again, an
  // error for different ones.
  Result<bool> already(const HostTensor& t) const;
  // Space for `bytes`: a chunk and an offset in it.
  Status reserve(uint64_t bytes, const Buffer*& buffer, uint64_t& offset);
  Status copy(const Buffer& buffer, uint64_t offset, const HostTensor& t, uint64_t& done,
              uint64_t total, const UploadProgress& progress);
  // The bytes agree with the type and shape; invalid_argument naming it else.
  Status check_bytes(const HostTensor& t) const;
  void add(const HostTensor& t, const Buffer* buffer, uint64_t offset);

  Device& device_;
  uint64_t alignment_;
  uint64_t chunk_bytes_;
  uint64_t max_range_;
  std::vector<std::unique_ptr<Buffer>> chunks_;     // packed tensors
  uint64_t used_ = 0;                               // bytes taken in chunks_.back()
  std::vector<std::unique_ptr<Buffer>> dedicated_;  // tensors past maxStorageBufferRange
  std::vector<std::unique_ptr<Buffer>> wrapped_;    // views of host memory (map_all)
  uint64_t mapped_bytes_ = 0;
  std::unordered_map<std::string, Entry> index_;
  uint64_t registered_bytes_ = 0;
};

}  // namespace minfer::shader
