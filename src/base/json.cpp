#include "base/json.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/utf8.h"

namespace minfer {
namespace {

// Where byte `read` (1-based; 0 is taken as 1) of `text` is: "line L,
// column C", both 1-based, the column counted in bytes.
std::string line_and_column(std::string_view text, std::size_t read) {
  const size_t at = std::min(read > 0 ? read - 1 : 0, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') ++line, line_start = i + 1;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(at - line_start + 1);
}

// Adds the member `key` to `object` with a null value to fill: the slot, and
// whether the key is new. A repeated key (when allowed) gets its first slot
// back, so the last value wins in the first one's place, as in nlohmann.
// json's object is a map, which says itself whether the key is new.
std::pair<nlohmann::json*, bool> add_member(nlohmann::json::object_t& object,
                                            std::unordered_set<std::string>&,
                                            const std::string& key) {
  auto [it, fresh] = object.emplace(key, nullptr);
  return {&it->second, fresh};
}

// ordered_json's object is a vector, which nlohmann's own parser searches for
// every key (quadratic in the members); `keys` finds repeats instead, and a
// new key is appended.
std::pair<nlohmann::ordered_json*, bool> add_member(nlohmann::ordered_json::object_t& object,
                                                    std::unordered_set<std::string>& keys,
                                                    const std::string& key) {
  if (!keys.insert(key).second) return {&object.find(key)->second, false};
  object.emplace_back(key, nullptr);
  return {&object.back().second, true};
}

// A SAX consumer that builds the document as nlohmann's parser reads it and
// stops at the first level past the limit or the first repeated key, so a
// hostile text never has a level past the limit built. The open containers
// are held by pointer: a container only grows again once its open child is
// closed, so the pointers stay valid.
template <typename Json>
class Builder {
 public:
  Builder(std::string_view text, const JsonParseOptions& options)
      : text_(text), options_(options) {}

  Json document;
  Status error;  // the first problem found; ok while the text is fine

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool b) { return add(Json(b)); }
  bool number_integer(int64_t v) { return add(Json(v)); }
  bool number_unsigned(uint64_t v) { return add(Json(v)); }
  bool number_float(double v, const std::string&) { return add(Json(v)); }
  bool string(std::string& s) { return add(Json(s)); }
  bool binary(typename Json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return open(Json::value_t::object); }
  bool start_array(std::size_t) { return open(Json::value_t::array); }
  bool end_object() {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool key(std::string& key) {
    auto& members = open_.back()->template get_ref<typename Json::object_t&>();
    const auto [slot, fresh] = add_member(members, keys_.back(), key);
    if (!fresh && !options_.allow_duplicate_keys) {
      // The key is valid UTF-8 (the lexer checked) but may hold control characters.
      error =
          Status::invalid_argument("JSON object has the key \"" + printable_text(key) + "\" twice");
      return false;
    }
    member_ = slot;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error = syntax_error(position, e);
    return false;
  }

 private:
  // Puts `v` where the parse is: the document, the open array's end or the
  // member slot the last key made.
  Json* place(Json&& v) {
    if (open_.empty()) {
      document = std::move(v);
      return &document;
    }
    if (open_.back()->is_array()) {
      auto& items = open_.back()->template get_ref<typename Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  bool add(Json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(typename Json::value_t kind) {
    if (open_.size() >= static_cast<size_t>(std::max(options_.max_depth, 0))) {
      error = Status::out_of_range("JSON nests arrays and objects deeper than " +
                                   std::to_string(options_.max_depth) + " levels");
      return false;
    }
    open_.push_back(place(Json(kind)));
    if (kind == Json::value_t::object) keys_.emplace_back();
    return true;
  }

  // "JSON line L, column C: <nlohmann's reason>". The position is computed
  // here from the byte offset, because nlohmann's own line and column are
  // off after a token that ended at a newline. The reason loses nlohmann's
  // "[json.exception.parse_error.101] parse error at ...: " prefix; the text
  // it quotes ("last read: ...") is raw input, so it is made printable.
  Status syntax_error(std::size_t position, const nlohmann::detail::exception& e) const {
    std::string reason = e.what();
    if (reason.starts_with("[json.exception.")) reason.erase(0, reason.find("] ") + 2);
    if (reason.starts_with("parse error")) reason.erase(0, reason.find(": ") + 2);
    return Status::invalid_argument("JSON " + line_and_column(text_, position) + ": " +
                                    printable_text(reason));
  }

  std::string_view text_;
  const JsonParseOptions& options_;
  std::vector<Json*> open_;                            // the open arrays and objects
  std::vector<std::unordered_set<std::string>> keys_;  // per open object, for ordered_json
  Json* member_ = nullptr;                             // the slot the last key made
};

template <typename Json>
Result<Json> parse_checked(std::string_view text, const JsonParseOptions& options) {
  // nlohmann's lexer takes a NUL byte for the end of the input and would
  // ignore whatever follows it. No JSON text holds one (inside a string it
  // must be written \u0000), so it is refused here.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::invalid_argument("JSON " + line_and_column(text, nul + 1) + ": a raw NUL byte");
  }
  Builder<Json> builder(text, options);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &builder);
  } catch (const std::exception& e) {  // the parser reports through parse_error; belt and braces
    return Status::invalid_argument(std::string("JSON ") + e.what());
  }
  if (!builder.error.is_ok()) return builder.error;
  if (!ok) return Status::internal("JSON parse stopped without a reason");
  return std::move(builder.document);
}

std::string quoted(std::string_view key) {
  return "\"" + printable_text(key) + "\"";
}

template <typename Json>
Result<const Json*> member(const Json& object, std::string_view key) {
  if (!object.is_object()) {
    return Status::invalid_argument("expected an object holding " + quoted(key));
  }
  const Json* v = json_find(object, key);
  if (v == nullptr) return Status::invalid_argument("no " + quoted(key));
  return v;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const JsonParseOptions& options) {
  return parse_checked<nlohmann::json>(text, options);
}

Result<nlohmann::ordered_json> parse_ordered_json(std::string_view text,
                                                  const JsonParseOptions& options) {
  return parse_checked<nlohmann::ordered_json>(text, options);
}

template <typename Json>
const Json* json_find(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

template <typename Json>
Result<int64_t> json_to_int(const Json& value, std::string_view what, int64_t min, int64_t max) {
  bool in_range = false;
  int64_t v = 0;
  if (value.is_number_unsigned()) {
    // Compared as unsigned: a value above INT64_MAX must not wrap negative.
    const auto u = value.template get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    v = static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    in_range = true;
    v = value.template get<int64_t>();
  }
  if (!in_range || v < min || v > max) {
    return Status::invalid_argument(std::string(what) + ": expected an integer in [" +
                                    std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

template <typename Json>
Result<std::string> json_get_string(const Json& object, std::string_view key) {
  MINFER_ASSIGN_OR_RETURN(const Json* v, member(object, key));
  if (!v->is_string()) return Status::invalid_argument(quoted(key) + " is not a string");
  return v->template get<std::string>();
}

template <typename Json>
Result<bool> json_get_bool(const Json& object, std::string_view key) {
  MINFER_ASSIGN_OR_RETURN(const Json* v, member(object, key));
  if (!v->is_boolean()) return Status::invalid_argument(quoted(key) + " is not a boolean");
  return v->template get<bool>();
}

template <typename Json>
Result<int64_t> json_get_int(const Json& object, std::string_view key, int64_t min, int64_t max) {
  MINFER_ASSIGN_OR_RETURN(const Json* v, member(object, key));
  return json_to_int(*v, quoted(key), min, max);
}

// The readers exist for the two document types parse_json() and
// parse_ordered_json() make.
#define MINFER_JSON_READERS(Json)                                                        \
  template const Json* json_find(const Json&, std::string_view);                         \
  template Result<int64_t> json_to_int(const Json&, std::string_view, int64_t, int64_t); \
  template Result<std::string> json_get_string(const Json&, std::string_view);           \
  template Result<bool> json_get_bool(const Json&, std::string_view);                    \
  template Result<int64_t> json_get_int(const Json&, std::string_view, int64_t, int64_t);
MINFER_JSON_READERS(nlohmann::json)
MINFER_JSON_READERS(nlohmann::ordered_json)
#undef MINFER_JSON_READERS

std::string json_quote(std::string_view s) {
  // Serialising a string value never throws with error_handler_t::replace.
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace minfer
