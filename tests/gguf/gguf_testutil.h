// Helpers shared by the gguf tests: a byte builder for hand-made (often
// malformed) GGUF files, a canonical text dump of a parsed file (the format
// tools/gguf_check.py prints from the reference reader), SHA-256, temporary
// directories, and the fuzz seed files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace minfer::gguf::testing {

// Appends little-endian GGUF fields.
class Raw {
 public:
  Raw& u8(uint8_t v) { return put(&v, 1); }
  Raw& u16(uint16_t v) { return put(&v, 2); }
  Raw& u32(uint32_t v) { return put(&v, 4); }
  Raw& u64(uint64_t v) { return put(&v, 8); }
  Raw& str(std::string_view s) {
    u64(s.size());
    return put(s.data(), s.size());
  }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(std::string_view key, uint32_t v) {
    return str(key).u32(static_cast<uint32_t>(ValueType::U32)).u32(v);
  }
  Raw& tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
              uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) u8(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  Raw& put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

std::string sha256_hex(const uint8_t* data, size_t n);

// One line per header field, key and tensor; see tools/gguf_check.py.
std::string canonical_dump(const File& f, size_t part = 0);
std::string canonical_value(const Value& v);

// A writer holding every value type, nested arrays and a few tensor types.
Writer sample_writer();

// Fills with a deterministic byte pattern derived from `seed`.
Writer::Fill pattern_fill(uint32_t seed);

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

std::vector<uint8_t> read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// The fuzz target's seed inputs, by file name.
std::vector<std::pair<std::string, std::vector<uint8_t>>> fuzz_seeds();

}  // namespace minfer::gguf::testing
