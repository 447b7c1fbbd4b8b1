// gguf::Writer: builds a GGUF file (version 3 by default, 2 on request) from
// metadata and tensors, for tests and synthetic models.
//
// Contract:
//  * Metadata keeps insertion order; set() on an existing key replaces its value
//    in place. Array values must have elements of their declared type (checked
//    when written: the error names the key and the element).
//  * add_tensor validates at once: 1..4 dims, each >= 0, element count within
//    int64, row length a multiple of the type's block size, unique name; the
//    bytes overload also checks the byte count. Tensor bytes are produced by
//    the Fill callback while the file is written, one tensor at a time, so a
//    multi-GB model is never held in memory (peak: the largest tensor).
//  * Layout: tensors in insertion order, each at a multiple of the alignment
//    (`general.alignment` if set, else 32) from the data section start, zero
//    padding between them and none after the last.
//  * write() writes a fresh temporary file beside PATH (PATH.tmp.<pid>.<n>,
//    created exclusively, never through a symbolic link) and renames it to
//    PATH only when everything succeeded, so PATH is never left half-written;
//    on failure the temporary is removed. PATH must be absent or a regular
//    file: a device node, FIFO, socket, directory or symbolic link there is
//    refused (checked before writing and again before the rename), never
//    replaced. Errors name the path and the errno text, or the tensor whose
//    Fill failed.
//  * write_split() writes N parts STEM-00001-of-0000N.gguf ... (STEM is PATH
//    without a trailing ".gguf"), tensors split into N contiguous runs of
//    near-equal count. Every part carries split.no (u16, 0-based), split.count
//    (u16) and split.tensors.count (i32) first, as llama.cpp's split tool does;
//    the first part then carries all other metadata; the others carry only
//    general.alignment besides, when it is set, because each part is parsed
//    with its own alignment.
//
// Threading: not thread-safe for mutation; write() is const but calls the Fill
// callbacks, which must be safe to call from the writing thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/value.h"
#include "quant/tensor_type.h"

namespace minfer::gguf {

class Sink;

class Writer {
 public:
  // Writes exactly out.size() bytes of the tensor into `out` (zero-filled on entry).
  using Fill = std::function<Status(std::span<uint8_t> out)>;

  Writer() = default;

  // 3 (default) or 2; the two layouts are identical.
  void set_version(uint32_t version) { version_ = version; }
  uint32_t version() const { return version_; }

  void set(std::string key, Value value);
  bool remove(std::string_view key);
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }

  void set_u32(std::string key, uint32_t v) { set(std::move(key), Value::u32(v)); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), Value::i32(v)); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), Value::u64(v)); }
  void set_f32(std::string key, float v) { set(std::move(key), Value::f32(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), Value::boolean(v)); }
  void set_string(std::string key, std::string v) {
    set(std::move(key), Value::string(std::move(v)));
  }
  void set_string_array(std::string key, const std::vector<std::string>& v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);

  Status add_tensor(std::string name, quant::TensorType type, std::vector<int64_t> dims, Fill fill);
  Status add_tensor(std::string name, quant::TensorType type, std::vector<int64_t> dims,
                    std::vector<uint8_t> bytes);
  size_t n_tensors() const { return tensors_.size(); }

  Status write(const std::string& path) const;
  Status write_split(const std::string& path, int n_parts) const;
  // The whole file in memory (small files: tests, fuzz seeds).
  Result<std::vector<uint8_t>> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    quant::TensorType type;
    std::vector<int64_t> dims;
    uint64_t nbytes;
    Fill fill;
  };
  using Metadata = std::vector<std::pair<std::string, Value>>;

  Result<uint64_t> alignment() const;
  Status validate_metadata(const Metadata& md) const;
  Status emit(Sink& sink, const Metadata& md, std::span<const Tensor> tensors,
              uint64_t alignment) const;
  static Status emit_tensors(Sink& sink, std::span<const Tensor> tensors, uint64_t alignment);
  Status write_to_path(const std::string& path, const Metadata& md, std::span<const Tensor> tensors,
                       uint64_t alignment) const;

  uint32_t version_ = 3;
  Metadata metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace minfer::gguf
