#include "gguf/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_set>

#include "gguf/file.h"
#include "gguf/mapped_file.h"

namespace minfer::gguf {

// Where emit() sends bytes: a file descriptor or a vector.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual Status put(const void* data, size_t n) = 0;
};

namespace {

class VectorSink final : public Sink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  Status put(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
    return Status::ok();
  }

 private:
  std::vector<uint8_t>& out_;
};

// Buffers small header writes; large tensor writes go straight through.
class FdSink final : public Sink {
 public:
  FdSink(int fd, const std::string& path) : fd_(fd), path_(path) {}
  Status put(const void* data, size_t n) override {
    if (n >= kBufferSize) {
      MINFER_RETURN_IF_ERROR(flush());
      return write_all(static_cast<const uint8_t*>(data), n);
    }
    if (buffer_.size() + n > kBufferSize) MINFER_RETURN_IF_ERROR(flush());
    const auto* p = static_cast<const uint8_t*>(data);
    buffer_.insert(buffer_.end(), p, p + n);
    return Status::ok();
  }
  Status flush() {
    Status s = write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }

 private:
  static constexpr size_t kBufferSize = 1 << 20;
  Status write_all(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Status::io_error(path_ + ": write failed: " + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
    return Status::ok();
  }
  int fd_;
  const std::string& path_;
  std::vector<uint8_t> buffer_;
};

template <typename T>
Status put_pod(Sink& s, T v) {
  return s.put(&v, sizeof(v));
}

Status put_string(Sink& s, std::string_view str) {
  MINFER_RETURN_IF_ERROR(put_pod<uint64_t>(s, str.size()));
  return s.put(str.data(), str.size());
}

Status put_value(Sink& s, const Value& v) {
  switch (v.type()) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return put_pod(s, static_cast<uint8_t>(v.raw_bits()));
    case ValueType::U16:
    case ValueType::I16:
      return put_pod(s, static_cast<uint16_t>(v.raw_bits()));
    case ValueType::U32:
    case ValueType::I32:
      return put_pod(s, static_cast<uint32_t>(v.raw_bits()));
    case ValueType::U64:
    case ValueType::I64:
      return put_pod(s, v.raw_bits());
    case ValueType::F32:
      return put_pod(s, static_cast<float>(v.raw_float()));
    case ValueType::F64:
      return put_pod(s, v.raw_float());
    case ValueType::STRING:
      return put_string(s, *v.to_string());
    case ValueType::ARRAY:
      MINFER_RETURN_IF_ERROR(put_pod(s, static_cast<uint32_t>(v.array_type())));
      MINFER_RETURN_IF_ERROR(put_pod<uint64_t>(s, v.array_size()));
      for (const Value& item : v.array()) MINFER_RETURN_IF_ERROR(put_value(s, item));
      return Status::ok();
  }
  return Status::invalid_argument("unknown value type");
}

Status validate_value(const Value& v, int depth) {
  if (v.type() != ValueType::ARRAY) return Status::ok();
  if (depth >= kMaxArrayDepth) {
    return Status::invalid_argument("arrays nested more than " + std::to_string(kMaxArrayDepth) +
                                    " deep");
  }
  if (!is_valid_value_type(static_cast<uint32_t>(v.array_type()))) {
    return Status::invalid_argument("array element type is not a GGUF value type");
  }
  for (size_t i = 0; i < v.array_size(); ++i) {
    const Value& item = v.array()[i];
    if (item.type() != v.array_type()) {
      return Status::invalid_argument("array element " + std::to_string(i) + " is " +
                                      std::string(value_type_name(item.type())) + ", expected " +
                                      std::string(value_type_name(v.array_type())));
    }
    MINFER_RETURN_IF_ERROR(validate_value(item, depth + 1));
  }
  return Status::ok();
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

Status put_zeros(Sink& s, uint64_t n) {
  static const uint8_t kZeros[256] = {};
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
    MINFER_RETURN_IF_ERROR(s.put(kZeros, k));
    n -= k;
  }
  return Status::ok();
}

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

void Writer::set(std::string key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

bool Writer::remove(std::string_view key) {
  for (auto it = metadata_.begin(); it != metadata_.end(); ++it) {
    if (it->first == key) {
      metadata_.erase(it);
      return true;
    }
  }
  return false;
}

const Value* Writer::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Writer::set_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const auto& s : v) items.push_back(Value::string(s));
  set(std::move(key), Value::array(ValueType::STRING, std::move(items)));
}

void Writer::set_f32_array(std::string key, const std::vector<float>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (float x : v) items.push_back(Value::f32(x));
  set(std::move(key), Value::array(ValueType::F32, std::move(items)));
}

void Writer::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(Value::i32(x));
  set(std::move(key), Value::array(ValueType::I32, std::move(items)));
}

Status Writer::add_tensor(std::string name, quant::TensorType type, std::vector<int64_t> dims,
                          Fill fill) {
  const std::string field = "tensor '" + name + "'";
  for (const Tensor& t : tensors_) {
    if (t.name == name) return Status::invalid_argument(field + ": duplicate tensor name");
  }
  if (dims.empty() || dims.size() > kMaxDims) {
    return Status::invalid_argument(field + ": " + std::to_string(dims.size()) +
                                    " dims, expected 1.." + std::to_string(kMaxDims));
  }
  int64_t rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      return Status::invalid_argument(field + ": negative dim " + std::to_string(dims[i]));
    if (i > 0 && __builtin_mul_overflow(rows, dims[i], &rows)) {
      return Status::invalid_argument(field + ": shape " + shape_string(dims) + " overflows int64");
    }
  }
  int64_t elements;
  if (__builtin_mul_overflow(rows, dims[0], &elements)) {
    return Status::invalid_argument(field + ": shape " + shape_string(dims) + " overflows int64");
  }
  auto row = quant::row_bytes(type, dims[0]);
  if (!row.is_ok()) return row.status().with_context(field);
  uint64_t nbytes;
  if (__builtin_mul_overflow(*row, static_cast<uint64_t>(rows), &nbytes)) {
    return Status::invalid_argument(field + ": byte size overflows u64");
  }
  tensors_.push_back(Tensor{std::move(name), type, std::move(dims), nbytes, std::move(fill)});
  return Status::ok();
}

Status Writer::add_tensor(std::string name, quant::TensorType type, std::vector<int64_t> dims,
                          std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  const size_t have = shared->size();
  const std::string tname = name;
  Fill fill = [shared](std::span<uint8_t> out) {
    std::memcpy(out.data(), shared->data(), out.size());
    return Status::ok();
  };
  MINFER_RETURN_IF_ERROR(add_tensor(std::move(name), type, std::move(dims), std::move(fill)));
  if (tensors_.back().nbytes != have) {
    const uint64_t want = tensors_.back().nbytes;
    tensors_.pop_back();
    return Status::invalid_argument("tensor '" + tname + "': " + std::to_string(have) +
                                    " bytes given, the shape and type need " +
                                    std::to_string(want));
  }
  return Status::ok();
}

Result<uint64_t> Writer::alignment() const {
  const Value* v = find(kKeyAlignment);
  if (v == nullptr) return kDefaultAlignment;
  const std::string field = "key '" + std::string(kKeyAlignment) + "': ";
  if (v->type() != ValueType::U32) {
    return Status::invalid_argument(field + "expected u32, found " +
                                    std::string(value_type_name(v->type())));
  }
  const uint64_t a = v->raw_bits();
  if (a == 0 || (a & (a - 1)) != 0) {
    return Status::invalid_argument(field + "alignment " + std::to_string(a) +
                                    " is not a nonzero power of two");
  }
  return a;
}

Status Writer::validate_metadata(const Metadata& md) const {
  if (version_ != 2 && version_ != 3) {
    return Status::invalid_argument("header: cannot write GGUF version " +
                                    std::to_string(version_));
  }
  std::unordered_set<std::string_view> seen;
  for (const auto& [key, value] : md) {
    if (!seen.insert(key).second)
      return Status::invalid_argument("key '" + key + "': duplicate key");
    Status s = validate_value(value, 0);
    if (!s.is_ok()) return s.with_context("key '" + key + "'");
  }
  return Status::ok();
}

Status Writer::emit(Sink& sink, const Metadata& md, std::span<const Tensor> tensors,
                    uint64_t alignment) const {
  MINFER_RETURN_IF_ERROR(validate_metadata(md));
  // The header is small (metadata and tensor table); build it whole, then stream tensors.
  std::vector<uint8_t> head;
  VectorSink hs(head);
  MINFER_RETURN_IF_ERROR(put_pod<uint32_t>(hs, kMagic));
  MINFER_RETURN_IF_ERROR(put_pod<uint32_t>(hs, version_));
  MINFER_RETURN_IF_ERROR(put_pod<uint64_t>(hs, tensors.size()));
  MINFER_RETURN_IF_ERROR(put_pod<uint64_t>(hs, md.size()));
  for (const auto& [key, value] : md) {
    MINFER_RETURN_IF_ERROR(put_string(hs, key));
    MINFER_RETURN_IF_ERROR(put_pod(hs, static_cast<uint32_t>(value.type())));
    MINFER_RETURN_IF_ERROR(put_value(hs, value));
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    offset = align_up(offset, alignment);
    MINFER_RETURN_IF_ERROR(put_string(hs, t.name));
    MINFER_RETURN_IF_ERROR(put_pod(hs, static_cast<uint32_t>(t.dims.size())));
    for (int64_t d : t.dims) MINFER_RETURN_IF_ERROR(put_pod(hs, static_cast<uint64_t>(d)));
    MINFER_RETURN_IF_ERROR(put_pod(hs, static_cast<uint32_t>(t.type)));
    MINFER_RETURN_IF_ERROR(put_pod(hs, offset));
    offset += t.nbytes;
  }
  MINFER_RETURN_IF_ERROR(put_zeros(hs, align_up(head.size(), alignment) - head.size()));
  MINFER_RETURN_IF_ERROR(sink.put(head.data(), head.size()));
  return emit_tensors(sink, tensors, alignment);
}

Status Writer::emit_tensors(Sink& sink, std::span<const Tensor> tensors, uint64_t alignment) {
  uint64_t pos = 0;  // within the data section
  std::vector<uint8_t> buf;
  for (const Tensor& t : tensors) {
    MINFER_RETURN_IF_ERROR(put_zeros(sink, align_up(pos, alignment) - pos));
    pos = align_up(pos, alignment);
    buf.assign(static_cast<size_t>(t.nbytes), 0);
    Status s = t.fill ? t.fill(buf) : Status::ok();
    if (!s.is_ok()) return s.with_context("tensor '" + t.name + "'");
    MINFER_RETURN_IF_ERROR(sink.put(buf.data(), buf.size()));
    pos += t.nbytes;
  }
  return Status::ok();
}

Result<std::vector<uint8_t>> Writer::to_bytes() const {
  MINFER_ASSIGN_OR_RETURN(uint64_t a, alignment());
  std::vector<uint8_t> out;
  VectorSink sink(out);
  MINFER_RETURN_IF_ERROR(emit(sink, metadata_, tensors_, a));
  return out;
}

namespace {

// An output is written to a temporary file and renamed over `path`, which
// replaces whatever `path` names: allowed only when that is nothing or a
// regular file (never a device node, FIFO, directory or symbolic link).
Status check_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Status::io_error(path + ": cannot stat: " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return Status::ok();
  return Status::invalid_argument(path + ": exists and is " + file_kind(st.st_mode) +
                                  "; refusing to replace it (give the path of a regular file)");
}

// Creates a fresh temporary file beside `path` (never an existing one, never
// through a symbolic link); returns its descriptor and sets `tmp`.
Result<int> create_temporary(const std::string& path, std::string& tmp) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return Status::io_error(tmp + ": cannot create: " + std::strerror(errno));
  }
  return Status::invalid_argument(path +
                                  ": cannot create a temporary file beside it (all names taken)");
}

}  // namespace

Status Writer::write_to_path(const std::string& path, const Metadata& md,
                             std::span<const Tensor> tensors, uint64_t alignment) const {
  MINFER_RETURN_IF_ERROR(check_replaceable(path));
  std::string tmp;
  MINFER_ASSIGN_OR_RETURN(const int fd, create_temporary(path, tmp));
  FdSink sink(fd, tmp);
  Status s = emit(sink, md, tensors, alignment);
  if (s.is_ok()) s = sink.flush();
  if (::close(fd) != 0 && s.is_ok()) {
    s = Status::io_error(tmp + ": close failed: " + std::strerror(errno));
  }
  // Checked again: writing takes a while, and `path` may have appeared meanwhile.
  if (s.is_ok()) s = check_replaceable(path);
  if (s.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Status::io_error(path + ": cannot rename " + tmp + " to it: " + std::strerror(errno));
  }
  if (!s.is_ok()) {
    ::unlink(tmp.c_str());
    return s.message().starts_with(tmp) || s.message().starts_with(path) ? s : s.with_context(path);
  }
  return Status::ok();
}

Status Writer::write(const std::string& path) const {
  MINFER_ASSIGN_OR_RETURN(uint64_t a, alignment());
  return write_to_path(path, metadata_, tensors_, a);
}

Status Writer::write_split(const std::string& path, int n_parts) const {
  const size_t n = tensors_.size();
  if (n_parts < 1 || n_parts > 99999 || static_cast<size_t>(n_parts) > std::max<size_t>(n, 1)) {
    return Status::invalid_argument(path + ": cannot split " + std::to_string(n) +
                                    " tensors into " + std::to_string(n_parts) + " parts");
  }
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::invalid_argument(path + ": too many tensors for split.tensors.count");
  }
  MINFER_ASSIGN_OR_RETURN(uint64_t a, alignment());
  std::string stem = path;
  if (stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
  // Every part is checked before any is written, so that a refused part
  // never leaves the others replaced.
  for (int i = 0; i < n_parts; ++i)
    MINFER_RETURN_IF_ERROR(check_replaceable(split_path(stem, i, n_parts)));
  std::vector<std::string> written;
  for (int i = 0; i < n_parts; ++i) {
    Metadata md;
    md.emplace_back(std::string(kKeySplitNo), Value::u16(static_cast<uint16_t>(i)));
    md.emplace_back(std::string(kKeySplitCount), Value::u16(static_cast<uint16_t>(n_parts)));
    md.emplace_back(std::string(kKeySplitTensorsCount), Value::i32(static_cast<int32_t>(n)));
    for (const auto& [k, v] : metadata_) {
      if (k.starts_with("split.")) continue;
      if (i == 0 || k == kKeyAlignment) md.emplace_back(k, v);
    }
    const size_t begin = n * static_cast<size_t>(i) / static_cast<size_t>(n_parts);
    const size_t end = n * static_cast<size_t>(i + 1) / static_cast<size_t>(n_parts);
    const std::string part = split_path(stem, i, n_parts);
    Status s = write_to_path(part, md, std::span(tensors_).subspan(begin, end - begin), a);
    if (!s.is_ok()) {
      // A partial set of parts would open as a "missing part" error later; remove it now.
      for (const auto& p : written) ::unlink(p.c_str());
      return s;
    }
    written.push_back(part);
  }
  return Status::ok();
}

}  // namespace minfer::gguf
