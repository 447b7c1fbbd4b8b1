// The weight table: every tensor of a model by GGUF name, plus tensors derived
// at load time (e.g. concatenated blk.N.attn_qkv for fused decode kernels).
//
// Contract: views point into the gguf::File's mapping (or into storage the
// table owns for derived tensors) and stay valid while both the File and the
// Weights live. Lookups by name; a missing name is nullptr from find() and an
// error naming the tensor from require(). Immutable after construction:
// concurrent readers are fine.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::gguf {
class File;
}

namespace minfer::model {

struct WeightView {
  std::string name;
  quant::TensorType type = quant::TensorType::F32;
  std::vector<int64_t> dims;  // dims[0] = row length
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t row_length() const { return dims.empty() ? 0 : dims[0]; }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
  size_t row_bytes() const { return rows() > 0 ? nbytes / static_cast<size_t>(rows()) : 0; }
};

class Weights {
 public:
  static Weights from_file(const gguf::File& file);

  const WeightView* find(std::string_view name) const;
  Result<const WeightView*> require(std::string_view name) const;
  const std::vector<WeightView>& all() const { return views_; }

  // Adds a view of bytes the table does not own (another table's view, or a
  // part of one); they must outlive the table.
  Status add_view(WeightView view);
  // Adds a tensor whose bytes the table owns (row-major concatenations).
  Status add_derived(std::string name, quant::TensorType type, std::vector<int64_t> dims,
                     std::vector<uint8_t> bytes);

  // Concatenates the rows of same-type, same-row-length tensors into `name`.
  Status concat_rows(const std::string& name, const std::vector<std::string>& parts);

 private:
  void reindex();
  std::vector<WeightView> views_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace minfer::model
