#include "gguf/parse.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace minfer::gguf::detail {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the reader maps GGUF's little-endian fields directly");

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Bounds-checked sequential reads over the file's bytes. Every error names
// the file and the field being read.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }
  const std::string& name() const { return name_; }

  Status error(std::string_view field, const std::string& message) const {
    return Status::invalid_argument(name_ + ": " + std::string(field) + ": " + message);
  }

  Status need(uint64_t n, std::string_view field, std::string_view what) const {
    if (n <= remaining()) return Status::ok();
    return error(field, "truncated: " + std::string(what) + " needs " + std::to_string(n) +
                            " bytes at offset " + std::to_string(pos_) + ", but the file has " +
                            std::to_string(size()) + " bytes");
  }

  template <typename T>
  Result<T> read(std::string_view field, std::string_view what) {
    MINFER_RETURN_IF_ERROR(need(sizeof(T), field, what));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(std::string_view field, std::string_view what) {
    MINFER_ASSIGN_OR_RETURN(uint64_t len, read<uint64_t>(field, std::string(what) + " length"));
    if (len > remaining()) {
      return error(field, std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                              std::to_string(remaining()) + " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

// The fewest bytes one element of this type can take on disk.
uint64_t min_encoded_size(ValueType t) {
  if (t == ValueType::STRING) return 8;     // length
  if (t == ValueType::ARRAY) return 4 + 8;  // element type + count
  return scalar_size(t);
}

Result<Value> read_value(Reader& r, ValueType type, const std::string& field, int depth);

Result<Value> read_array(Reader& r, const std::string& field, int depth) {
  if (depth >= kMaxArrayDepth) {
    return r.error(field, "arrays nested more than " + std::to_string(kMaxArrayDepth) +
                              " deep at offset " + std::to_string(r.pos()));
  }
  MINFER_ASSIGN_OR_RETURN(uint32_t raw_elem, r.read<uint32_t>(field, "array element type"));
  if (!is_valid_value_type(raw_elem)) {
    return r.error(field,
                   "array element type " + std::to_string(raw_elem) + " is not a GGUF value type");
  }
  const auto elem = static_cast<ValueType>(raw_elem);
  MINFER_ASSIGN_OR_RETURN(uint64_t count, r.read<uint64_t>(field, "array length"));
  const uint64_t min_size = min_encoded_size(elem);
  if (count > r.remaining() / min_size) {
    return r.error(field, "array of " + std::to_string(count) + " " +
                              std::string(value_type_name(elem)) + " elements exceeds the " +
                              std::to_string(r.remaining()) + " bytes left in the file");
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    MINFER_ASSIGN_OR_RETURN(Value v, read_value(r, elem, field, depth + 1));
    items.push_back(std::move(v));
  }
  return Value::array(elem, std::move(items));
}

Result<Value> read_value(Reader& r, ValueType type, const std::string& field, int depth) {
  switch (type) {
    case ValueType::U8: {
      MINFER_ASSIGN_OR_RETURN(uint8_t v, r.read<uint8_t>(field, "u8 value"));
      return Value::u8(v);
    }
    case ValueType::I8: {
      MINFER_ASSIGN_OR_RETURN(int8_t v, r.read<int8_t>(field, "i8 value"));
      return Value::i8(v);
    }
    case ValueType::U16: {
      MINFER_ASSIGN_OR_RETURN(uint16_t v, r.read<uint16_t>(field, "u16 value"));
      return Value::u16(v);
    }
    case ValueType::I16: {
      MINFER_ASSIGN_OR_RETURN(int16_t v, r.read<int16_t>(field, "i16 value"));
      return Value::i16(v);
    }
    case ValueType::U32: {
      MINFER_ASSIGN_OR_RETURN(uint32_t v, r.read<uint32_t>(field, "u32 value"));
      return Value::u32(v);
    }
    case ValueType::I32: {
      MINFER_ASSIGN_OR_RETURN(int32_t v, r.read<int32_t>(field, "i32 value"));
      return Value::i32(v);
    }
    case ValueType::U64: {
      MINFER_ASSIGN_OR_RETURN(uint64_t v, r.read<uint64_t>(field, "u64 value"));
      return Value::u64(v);
    }
    case ValueType::I64: {
      MINFER_ASSIGN_OR_RETURN(int64_t v, r.read<int64_t>(field, "i64 value"));
      return Value::i64(v);
    }
    case ValueType::F32: {
      MINFER_ASSIGN_OR_RETURN(float v, r.read<float>(field, "f32 value"));
      return Value::f32(v);
    }
    case ValueType::F64: {
      MINFER_ASSIGN_OR_RETURN(double v, r.read<double>(field, "f64 value"));
      return Value::f64(v);
    }
    case ValueType::BOOL: {
      // Any nonzero byte reads as true, as the reference readers do.
      MINFER_ASSIGN_OR_RETURN(uint8_t v, r.read<uint8_t>(field, "bool value"));
      return Value::boolean(v != 0);
    }
    case ValueType::STRING: {
      MINFER_ASSIGN_OR_RETURN(std::string s, r.read_string(field, "string"));
      return Value::string(std::move(s));
    }
    case ValueType::ARRAY:
      return read_array(r, field, depth);
  }
  return r.error(field, "value type " + std::to_string(static_cast<uint32_t>(type)) +
                            " is not a GGUF value type");
}

Status read_header(Reader& r, ParsedPart& out, uint64_t& n_tensors, uint64_t& n_kv) {
  MINFER_ASSIGN_OR_RETURN(uint32_t magic, r.read<uint32_t>("header", "magic"));
  if (magic != kMagic) {
    return r.error("header", "bad magic " + hex32(magic) + " (expected " + hex32(kMagic) +
                                 ", \"GGUF\"): not a GGUF file");
  }
  MINFER_ASSIGN_OR_RETURN(uint32_t version, r.read<uint32_t>("header", "version"));
  if (version != 0 && (version & 0xFFFF) == 0) {
    return r.error("header", "version " + hex32(version) +
                                 " looks byte-swapped: big-endian GGUF files are not supported");
  }
  if (version == 1) {
    return r.error("header",
                   "GGUF version 1 is not supported (only versions 2 and 3 are); "
                   "re-convert the model with a current converter");
  }
  if (version != 2 && version != 3) {
    return r.error("header",
                   "unsupported GGUF version " + std::to_string(version) + " (supported: 2, 3)");
  }
  out.version = version;
  MINFER_ASSIGN_OR_RETURN(n_tensors, r.read<uint64_t>("tensor count", "tensor count"));
  MINFER_ASSIGN_OR_RETURN(n_kv, r.read<uint64_t>("metadata count", "metadata count"));
  // Smallest tensor info: name length, n_dims, one dim, type, offset.
  if (n_tensors > r.remaining() / 32) {
    return r.error("tensor count", std::to_string(n_tensors) + " tensors cannot fit in the " +
                                       std::to_string(r.remaining()) + " bytes left in the file");
  }
  // Smallest key/value: key length, value type, one byte of value.
  if (n_kv > r.remaining() / 13) {
    return r.error("metadata count", std::to_string(n_kv) + " keys cannot fit in the " +
                                         std::to_string(r.remaining()) + " bytes left in the file");
  }
  return Status::ok();
}

Status read_metadata(Reader& r, uint64_t n_kv, ParsedPart& out) {
  std::unordered_map<std::string, size_t> seen;
  out.metadata.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string index_field = "key #" + std::to_string(i);
    MINFER_ASSIGN_OR_RETURN(std::string key, r.read_string(index_field, "key"));
    const std::string field = "key '" + key + "'";
    if (auto it = seen.find(key); it != seen.end()) {
      return r.error(field, "duplicate key (entries #" + std::to_string(it->second) + " and #" +
                                std::to_string(i) + ")");
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t raw_type, r.read<uint32_t>(field, "value type"));
    if (!is_valid_value_type(raw_type)) {
      return r.error(field, "value type " + std::to_string(raw_type) + " is not a GGUF value type");
    }
    MINFER_ASSIGN_OR_RETURN(Value v, read_value(r, static_cast<ValueType>(raw_type), field, 0));
    seen.emplace(key, static_cast<size_t>(i));
    out.metadata.emplace_back(std::move(key), std::move(v));
  }
  return Status::ok();
}

Status read_alignment(Reader& r, ParsedPart& out) {
  const std::string field = "key '" + std::string(kKeyAlignment) + "'";
  for (const auto& [key, value] : out.metadata) {
    if (key != kKeyAlignment) continue;
    if (value.type() != ValueType::U32) {
      return r.error(field, "expected u32, found " + std::string(value_type_name(value.type())));
    }
    const uint64_t a = value.raw_bits();
    if (a == 0 || (a & (a - 1)) != 0) {
      return r.error(field, "alignment " + std::to_string(a) + " is not a nonzero power of two");
    }
    out.alignment = a;
  }
  return Status::ok();
}

Result<int64_t> read_dims(Reader& r, const std::string& field, TensorInfo& t) {
  MINFER_ASSIGN_OR_RETURN(uint32_t n_dims, r.read<uint32_t>(field, "n_dims"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return r.error(
        field, "n_dims " + std::to_string(n_dims) + " is outside 1.." + std::to_string(kMaxDims));
  }
  int64_t elements = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < n_dims; ++d) {
    MINFER_ASSIGN_OR_RETURN(uint64_t raw, r.read<uint64_t>(field, "dim"));
    if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return r.error(field, "dim " + std::to_string(d) + " is " + std::to_string(raw) +
                                " (negative as int64)");
    }
    const auto dim = static_cast<int64_t>(raw);
    t.dims.push_back(dim);
    overflow = overflow || __builtin_mul_overflow(elements, dim, &elements);
  }
  // A zero dim makes the product 0 even when earlier dims overflowed; still an error,
  // since ggml computes strides from the partial products.
  if (overflow) {
    std::string shape;
    for (int64_t d : t.dims) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
    return r.error(field, "element count of shape [" + shape + "] overflows int64");
  }
  return elements;
}

Status read_tensor_info(Reader& r, uint64_t index, const ParsedPart& part, TensorInfo& t) {
  MINFER_ASSIGN_OR_RETURN(t.name, r.read_string("tensor #" + std::to_string(index), "name"));
  const std::string field = "tensor '" + t.name + "'";
  MINFER_ASSIGN_OR_RETURN(int64_t elements, read_dims(r, field, t));
  MINFER_ASSIGN_OR_RETURN(uint32_t raw_type, r.read<uint32_t>(field, "type"));
  const quant::TypeTraits* traits = quant::find_type_traits(raw_type);
  if (traits == nullptr) {
    return r.error(field, "unknown tensor type " + std::to_string(raw_type));
  }
  t.type = traits->type;
  auto row = quant::row_bytes(t.type, t.dims[0]);
  if (!row.is_ok()) return r.error(field, row.message());
  const int64_t rows = t.dims[0] == 0 ? 0 : elements / t.dims[0];
  if (rows > 0 && *row > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(rows)) {
    return r.error(field, "byte size overflows u64");
  }
  t.nbytes = *row * static_cast<uint64_t>(rows);
  MINFER_ASSIGN_OR_RETURN(t.offset, r.read<uint64_t>(field, "offset"));
  if (t.offset % part.alignment != 0) {
    return r.error(field, "offset " + std::to_string(t.offset) +
                              " is not a multiple of the alignment " +
                              std::to_string(part.alignment));
  }
  return Status::ok();
}

Status place_tensors(const Reader& r, std::span<const uint8_t> bytes, ParsedPart& out) {
  const uint64_t size = bytes.size();
  if (!out.tensors.empty() && out.data_offset > size) {
    return r.error("data section", "starts at offset " + std::to_string(out.data_offset) +
                                       ", past the end of the file (" + std::to_string(size) +
                                       " bytes)");
  }
  const uint64_t data_size = out.tensors.empty() ? 0 : size - out.data_offset;
  for (TensorInfo& t : out.tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return r.error("tensor '" + t.name + "'", "data at offset " + std::to_string(t.offset) +
                                                    " (+" + std::to_string(t.nbytes) +
                                                    " bytes) extends past the end of the file (" +
                                                    std::to_string(data_size) + " bytes of data)");
    }
    t.file_offset = out.data_offset + t.offset;
    t.data = bytes.data() + t.file_offset;
  }
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : out.tensors) {
    if (t.nbytes > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& prev = *order[i - 1];
    const TensorInfo& cur = *order[i];
    if (cur.offset < prev.offset + prev.nbytes) {
      return r.error("tensor '" + cur.name + "'",
                     "data at offset " + std::to_string(cur.offset) + " overlaps tensor '" +
                         prev.name + "' at offset " + std::to_string(prev.offset) + " (+" +
                         std::to_string(prev.nbytes) + " bytes)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<ParsedPart> parse_part(std::span<const uint8_t> bytes, const std::string& name,
                              uint32_t part_index) {
  Reader r(bytes, name);
  ParsedPart out;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  MINFER_RETURN_IF_ERROR(read_header(r, out, n_tensors, n_kv));
  MINFER_RETURN_IF_ERROR(read_metadata(r, n_kv, out));
  MINFER_RETURN_IF_ERROR(read_alignment(r, out));
  std::unordered_map<std::string_view, uint64_t> seen;
  out.tensors.resize(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo& t = out.tensors[static_cast<size_t>(i)];
    t.part = part_index;
    MINFER_RETURN_IF_ERROR(read_tensor_info(r, i, out, t));
    if (auto [it, fresh] = seen.emplace(t.name, i); !fresh) {
      return r.error("tensor '" + t.name + "'", "duplicate tensor name (tensors #" +
                                                    std::to_string(it->second) + " and #" +
                                                    std::to_string(i) + ")");
    }
  }
  const uint64_t pos = r.pos();
  out.data_offset = (pos + out.alignment - 1) / out.alignment * out.alignment;
  MINFER_RETURN_IF_ERROR(place_tensors(r, bytes, out));
  return out;
}

}  // namespace minfer::gguf::detail
