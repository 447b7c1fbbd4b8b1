// gguf::File: a GGUF model (one file, or all parts of a split model) mapped
// read-only, with its metadata and tensor table parsed and validated.
//
// Contract:
//  * Versions 2 and 3 are read; version 1 and big-endian files are refused.
//  * Everything is validated at open(): every read is bounds-checked against the
//    file size; counts and lengths are checked against the bytes left before
//    anything is allocated for them; arrays nest at most kMaxArrayDepth deep;
//    metadata keys and tensor names are unique; `general.alignment` (default
//    32) is a u32, nonzero power of two; each tensor has 1..4 dims, each dim in
//    [0, INT64_MAX] (zero-size dims are accepted, as ggml does; negative ones,
//    i.e. u64 values above INT64_MAX, are not), an element count that fits in
//    int64, a known type, a row length that is a multiple of the type's block
//    size, an offset that is a multiple of the alignment, data inside the file,
//    and no overlap with another tensor's bytes.
//  * Every error is a value whose message starts with the file's path (or the
//    display name given to from_bytes), then the field ("header", "key 'K'",
//    "tensor 'T'", "tensor count", ...), then the offending value.
//  * Split models: opening a path named STEM-0000k-of-0000N.gguf opens all N
//    parts STEM-00001-of-0000N.gguf ... in that directory. metadata() is the
//    first part's (split.* keys included); tensors() lists every part's tensors
//    in part order. Each part must carry split.no == its 0-based index and
//    split.count == N; split.tensors.count, where present, must equal the total
//    tensor count; a tensor name may appear in only one part.
//
// Ownership and lifetime: the File owns the mappings (or the bytes given to
// from_bytes). TensorInfo::data points into them and is valid while the File
// lives; Values are copies and outlive it.
//
// Threading: a File is immutable after open(); const access from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/mapped_file.h"
#include "gguf/value.h"
#include "quant/tensor_type.h"

namespace minfer::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr size_t kMaxDims = 4;
inline constexpr int kMaxArrayDepth = 8;  // an array inside an array is depth 2

inline constexpr std::string_view kKeyAlignment = "general.alignment";
inline constexpr std::string_view kKeySplitNo = "split.no";                       // u16, 0-based
inline constexpr std::string_view kKeySplitCount = "split.count";                 // u16
inline constexpr std::string_view kKeySplitTensorsCount = "split.tensors.count";  // i32

struct TensorInfo {
  std::string name;
  quant::TensorType type = quant::TensorType::F32;
  std::vector<int64_t> dims;  // dims[0] = row length, fastest varying, as stored
  uint64_t offset = 0;        // within its part's data section
  uint64_t file_offset = 0;   // absolute in its part
  uint64_t nbytes = 0;
  uint32_t part = 0;              // 0-based index into File::paths()
  const uint8_t* data = nullptr;  // into the mapping; valid while the File lives
  int64_t n_elements() const;
  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(nbytes)}; }
};

// "STEM-00002-of-00005.gguf" for (STEM, 1, 5): part index 0-based, names 1-based.
std::string split_path(std::string_view stem, int part_index, int n_parts);

class File {
 public:
  // Opens a file, or all parts of a split model when `path` is named like one.
  static Result<std::unique_ptr<File>> open(const std::string& path);
  // Parses a single (unsplit) GGUF held in memory; errors are prefixed with
  // `display_name`. Split keys are read as plain metadata.
  static Result<std::unique_ptr<File>> from_bytes(std::vector<uint8_t> bytes,
                                                  std::string display_name);

  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t n_parts() const { return paths_.size(); }
  const std::vector<std::string>& paths() const { return paths_; }
  // Absolute offset of each part's data section.
  uint64_t data_offset(size_t part = 0) const { return data_offsets_.at(part); }

  // In file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. Errors: "FILE: key 'K' not found"; "FILE: key 'K': expected
  // <type>, found <type>"; "FILE: key 'K': value 70000 does not fit in u16".
  // Integer getters accept any integer type whose value fits; get_f32 and
  // get_f32_array accept any numeric type.
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int32_t>> get_i32_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  uint64_t total_tensor_bytes() const;

 private:
  File() = default;
  class Builder;

  Result<const Value*> require(std::string_view key) const;
  Result<const Value*> require_array(std::string_view key, ValueType elem_kind) const;
  Status key_error(std::string_view key, const Status& inner) const;
  void build_indexes();

  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  std::vector<std::string> paths_;
  std::vector<uint64_t> data_offsets_;
  std::vector<MappedFile> maps_;
  std::vector<uint8_t> owned_bytes_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace minfer::gguf
