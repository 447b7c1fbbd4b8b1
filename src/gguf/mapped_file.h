// A read-only memory mapping of a whole file.
//
// Contract: MappedFile::open maps the file read-only and shared; the mapping is
// released when the MappedFile is destroyed (move-only RAII; a moved-from
// object holds nothing). An empty file is represented without a mapping (data()
// is nullptr, size() is 0). Anything but a regular file (a FIFO, pipe,
// device, directory) is refused with its kind named, without blocking: a FIFO
// with no writer does not hang open(). Errors name the path and the errno text.
//
// Threading: the mapped bytes are immutable; read them from any thread.
// Lifetime: pointers into data() are valid while the MappedFile lives. If the
// file is truncated by another process while mapped, reads past the new end
// fault; that is outside what a reader can defend against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace minfer::gguf {

// "a directory", "a FIFO or pipe", "a character device", ... for a st_mode.
const char* file_kind(unsigned mode);

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace minfer::gguf
