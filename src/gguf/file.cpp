#include "gguf/file.h"

#include <cstdio>
#include <optional>
#include <regex>

#include "gguf/parse.h"

namespace minfer::gguf {
namespace {

struct SplitName {
  std::string stem;
  int index = 0;  // 0-based
  int count = 0;
};

// Recognizes STEM-00002-of-00005.gguf (five digits, as llama.cpp's split tool names parts).
std::optional<SplitName> parse_split_name(const std::string& path) {
  static const std::regex kPattern(R"(^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
  std::smatch m;
  if (!std::regex_match(path, m, kPattern)) return std::nullopt;
  SplitName out{m[1].str(), std::stoi(m[2].str()) - 1, std::stoi(m[3].str())};
  if (out.count < 1 || out.index < 0 || out.index >= out.count) return std::nullopt;
  return out;
}

// The split key's value as an integer, or nullopt when absent.
Result<std::optional<int64_t>> split_key(const detail::ParsedPart& part, const std::string& path,
                                         std::string_view key) {
  for (const auto& [k, v] : part.metadata) {
    if (k != key) continue;
    auto i = v.to_i64();
    if (!i.is_ok()) return i.status().with_context(path + ": key '" + k + "'");
    return std::optional<int64_t>(*i);
  }
  return std::optional<int64_t>();
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // validated at open() not to overflow
  return n;
}

std::string split_path(std::string_view stem, int part_index, int n_parts) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", part_index + 1, n_parts);
  return std::string(stem) + buf;
}

File::~File() = default;

// Assembles a File from parsed parts and checks that the parts agree.
class File::Builder {
 public:
  explicit Builder(File& f) : f_(f) {}

  Status add_part(detail::ParsedPart part, const std::string& path) {
    const auto index = static_cast<uint32_t>(f_.paths_.size());
    if (index == 0) {
      f_.version_ = part.version;
      f_.alignment_ = part.alignment;
      f_.metadata_ = std::move(part.metadata);
    }
    f_.paths_.push_back(path);
    f_.data_offsets_.push_back(part.data_offset);
    for (TensorInfo& t : part.tensors) {
      if (auto it = owner_.find(t.name); it != owner_.end()) {
        return Status::invalid_argument(
            path + ": tensor '" + t.name + "': appears in part " + std::to_string(index + 1) +
            " and in part " + std::to_string(it->second + 1) + " (" + f_.paths_[it->second] + ")");
      }
      owner_.emplace(t.name, index);
      f_.tensors_.push_back(std::move(t));
    }
    return Status::ok();
  }

 private:
  File& f_;
  std::unordered_map<std::string, uint32_t> owner_;
};

Result<std::unique_ptr<File>> File::from_bytes(std::vector<uint8_t> bytes,
                                               std::string display_name) {
  std::unique_ptr<File> f(new File());
  f->owned_bytes_ = std::move(bytes);
  MINFER_ASSIGN_OR_RETURN(detail::ParsedPart part,
                          detail::parse_part(f->owned_bytes_, display_name, 0));
  Builder b(*f);
  MINFER_RETURN_IF_ERROR(b.add_part(std::move(part), display_name));
  f->build_indexes();
  return f;
}

namespace {

// Checks a split part's own keys; returns its split.tensors.count when present.
Result<std::optional<int64_t>> check_split_part(const detail::ParsedPart& part,
                                                const std::string& path, int index, int count) {
  MINFER_ASSIGN_OR_RETURN(auto no, split_key(part, path, kKeySplitNo));
  MINFER_ASSIGN_OR_RETURN(auto n, split_key(part, path, kKeySplitCount));
  MINFER_ASSIGN_OR_RETURN(auto total, split_key(part, path, kKeySplitTensorsCount));
  const std::string where = path + ": key '";
  if (!no)
    return Status::invalid_argument(where + std::string(kKeySplitNo) +
                                    "' not found in a split part");
  if (!n)
    return Status::invalid_argument(where + std::string(kKeySplitCount) +
                                    "' not found in a split part");
  if (*no != index) {
    return Status::invalid_argument(
        where + std::string(kKeySplitNo) + "': value " + std::to_string(*no) +
        ", but the file name makes it part index " + std::to_string(index));
  }
  if (*n != count) {
    return Status::invalid_argument(where + std::string(kKeySplitCount) + "': value " +
                                    std::to_string(*n) + ", but the file name says " +
                                    std::to_string(count) + " parts");
  }
  return total;
}

Status check_unsplit(const detail::ParsedPart& part, const std::string& path) {
  MINFER_ASSIGN_OR_RETURN(auto n, split_key(part, path, kKeySplitCount));
  if (n && *n != 1) {
    return Status::invalid_argument(
        path + ": key '" + std::string(kKeySplitCount) + "': value " + std::to_string(*n) +
        " marks a split model, but the file name does not follow the "
        "NAME-00001-of-0000N.gguf pattern needed to find the other parts");
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<File>> File::open(const std::string& path) {
  std::unique_ptr<File> f(new File());
  Builder b(*f);
  const std::optional<SplitName> split = parse_split_name(path);
  const int count = split ? split->count : 1;
  std::vector<std::pair<std::string, int64_t>> declared_totals;
  for (int i = 0; i < count; ++i) {
    const std::string part_path = split ? split_path(split->stem, i, count) : path;
    auto map = MappedFile::open(part_path);
    if (!map.is_ok()) {
      if (!split) return map.status();
      return map.status().with_context("split model " + path + ": part " + std::to_string(i + 1) +
                                       " of " + std::to_string(count));
    }
    f->maps_.push_back(std::move(map).value());
    MINFER_ASSIGN_OR_RETURN(
        detail::ParsedPart part,
        detail::parse_part(f->maps_.back().bytes(), part_path, static_cast<uint32_t>(i)));
    if (split) {
      MINFER_ASSIGN_OR_RETURN(auto total, check_split_part(part, part_path, i, count));
      if (total) declared_totals.emplace_back(part_path, *total);
    } else {
      MINFER_RETURN_IF_ERROR(check_unsplit(part, path));
    }
    MINFER_RETURN_IF_ERROR(b.add_part(std::move(part), part_path));
  }
  for (const auto& [part_path, total] : declared_totals) {
    if (total != static_cast<int64_t>(f->tensors_.size())) {
      return Status::invalid_argument(part_path + ": key '" + std::string(kKeySplitTensorsCount) +
                                      "': value " + std::to_string(total) + ", but the " +
                                      std::to_string(count) + " parts hold " +
                                      std::to_string(f->tensors_.size()) + " tensors");
    }
  }
  f->build_indexes();
  return f;
}

void File::build_indexes() {
  for (size_t i = 0; i < metadata_.size(); ++i) key_index_.emplace(metadata_[i].first, i);
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
}

const Value* File::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t File::total_tensor_bytes() const {
  uint64_t total = 0;
  for (const TensorInfo& t : tensors_) total += t.nbytes;
  return total;
}

Status File::key_error(std::string_view key, const Status& inner) const {
  return Status::invalid_argument(paths_.front() + ": key '" + std::string(key) +
                                  "': " + inner.message());
}

Result<const Value*> File::require(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr)
    return Status::not_found(paths_.front() + ": key '" + std::string(key) + "' not found");
  return v;
}

Result<const Value*> File::require_array(std::string_view key, ValueType elem_kind) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  if (v->type() != ValueType::ARRAY) {
    return key_error(key, Status::invalid_argument(
                              "expected array of " + std::string(value_type_name(elem_kind)) +
                              ", found " + std::string(value_type_name(v->type()))));
  }
  return v;
}

Result<uint32_t> File::get_u32(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_unsigned_checked(ValueType::U32);
  if (!r.is_ok()) return key_error(key, r.status());
  return static_cast<uint32_t>(*r);
}

Result<uint64_t> File::get_u64(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_u64();
  if (!r.is_ok()) return key_error(key, r.status());
  return *r;
}

Result<int32_t> File::get_i32(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_signed_checked(ValueType::I32);
  if (!r.is_ok()) return key_error(key, r.status());
  return static_cast<int32_t>(*r);
}

Result<float> File::get_f32(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_f64();
  if (!r.is_ok())
    return key_error(key, Status::invalid_argument("expected f32, found " +
                                                   std::string(value_type_name(v->type()))));
  return static_cast<float>(*r);
}

Result<bool> File::get_bool(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_bool();
  if (!r.is_ok()) return key_error(key, r.status());
  return *r;
}

Result<std::string> File::get_string(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  auto r = v->to_string();
  if (!r.is_ok()) return key_error(key, r.status());
  return std::string(*r);
}

Result<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require_array(key, ValueType::STRING));
  std::vector<std::string> out;
  out.reserve(v->array_size());
  for (size_t i = 0; i < v->array_size(); ++i) {
    auto s = v->array()[i].to_string();
    if (!s.is_ok()) return key_error(key, s.status().with_context("element " + std::to_string(i)));
    out.emplace_back(*s);
  }
  return out;
}

Result<std::vector<float>> File::get_f32_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require_array(key, ValueType::F32));
  std::vector<float> out;
  out.reserve(v->array_size());
  for (size_t i = 0; i < v->array_size(); ++i) {
    auto x = v->array()[i].to_f64();
    if (!x.is_ok()) return key_error(key, x.status().with_context("element " + std::to_string(i)));
    out.push_back(static_cast<float>(*x));
  }
  return out;
}

Result<std::vector<int32_t>> File::get_i32_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require_array(key, ValueType::I32));
  std::vector<int32_t> out;
  out.reserve(v->array_size());
  for (size_t i = 0; i < v->array_size(); ++i) {
    auto x = v->array()[i].to_signed_checked(ValueType::I32);
    if (!x.is_ok()) return key_error(key, x.status().with_context("element " + std::to_string(i)));
    out.push_back(static_cast<int32_t>(*x));
  }
  return out;
}

}  // namespace minfer::gguf
