// A model's weights in device memory: every tensor of a model::Weights table,
// uploaded once into one device allocation and found by GGUF name.
//
// Contract: get() uploads all tensors or fails naming the first that cannot go
// (a type without a device decoder, a non-F32 row length that is not a
// multiple of 32) or the memory shortfall (needed vs free, in MiB); the
// all-weights gate (docs/ARCHITECTURE.md, "Contracts" 2) rests on this all-or-nothing upload.
// Uploads are shared: backends over the same Weights table (e.g. several
// Sessions of one Model) get the same DeviceWeights while one of them lives.
// Each tensor starts at a 256-byte aligned device address. The copy goes
// through two pinned staging buffers, double-buffered on a stream of its own
// (one pageable cudaMemcpy per tensor when pinned memory is refused); copy
// errors name the tensor. stderr gets a progress bar while it runs (a
// terminal and more than 64 MiB only) and one summary line: size, time,
// GB/s and the path taken.
// Include only from .cu files. Threading: get() is thread-safe; a
// DeviceWeights is immutable.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/cuda/device.h"
#include "model/weights.h"

namespace minfer::cuda {

struct DeviceWeight {
  quant::TensorType type = quant::TensorType::F32;
  int64_t rows = 0;
  int64_t row_len = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;  // device address
};

class DeviceWeights {
 public:
  static Result<std::shared_ptr<const DeviceWeights>> get(const model::Weights& weights);

  const DeviceWeight* find(std::string_view name) const;
  size_t bytes() const { return arena_.size(); }

 private:
  // Whether this upload was made from `weights` (same tensors, same host data).
  bool made_from(const model::Weights& weights) const;

  DeviceBuffer arena_;
  std::unordered_map<std::string, DeviceWeight> index_;
  std::vector<const uint8_t*> host_data_;  // the source of each tensor, in table order
};

}  // namespace minfer::cuda
