#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace minfer::gguf {
namespace {

Status errno_error(const std::string& path, const char* what, int err) {
  std::string message = path + ": cannot " + what + ": " + std::strerror(err);
  return err == ENOENT ? Status::not_found(std::move(message))
                       : Status::io_error(std::move(message));
}

// Closes the descriptor on every path out of open(); the mapping stays valid.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

const char* file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO or pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

MappedFile::~MappedFile() {
  reset();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; it has no effect on the regular files that get past fstat.
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) return errno_error(path, "open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return errno_error(path, "stat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(path + ": not a regular file (" + file_kind(st.st_mode) +
                                    "); a model must be a file that can be mapped");
  }
  MappedFile out;
  if (st.st_size == 0) return out;
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return errno_error(path, "mmap", errno);
  out.data_ = static_cast<const uint8_t*>(p);
  out.size_ = static_cast<size_t>(st.st_size);
  return out;
}

}  // namespace minfer::gguf
