#include "serve/request_json.h"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

namespace minfer::serve {
namespace {

// A SAX consumer that builds nothing: it counts the open arrays and objects
// and stops the parse at the first one past the limit, so a hostile body
// costs at most one pass over its bytes and no allocation per level.
class DepthCheck {
 public:
  bool too_deep = false;
  bool syntax_error = false;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(int64_t) { return true; }
  bool number_unsigned(uint64_t) { return true; }
  bool number_float(double, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(nlohmann::json::binary_t&) { return true; }
  bool key(std::string&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool start_array(std::size_t) { return open(); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    syntax_error = true;
    return false;
  }

 private:
  bool open() {
    if (++depth_ > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  int depth_ = 0;
};

Status not_json() {
  return Status::invalid_argument("the body is not valid JSON (or not valid UTF-8)");
}

// The SAX pass: ok when the body is JSON no deeper than the limit.
Status check_shape(std::string_view body) {
  DepthCheck check;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(body, &check);
  } catch (const std::exception&) {  // the parser reports through parse_error; belt and braces
    return not_json();
  }
  if (check.too_deep) {
    return Status::invalid_argument("the body nests arrays and objects deeper than " +
                                    std::to_string(kMaxJsonDepth) + " levels");
  }
  if (!ok || check.syntax_error) return not_json();
  return Status::ok();
}

template <typename Json>
Result<Json> parse_checked(std::string_view body) {
  MINFER_RETURN_IF_ERROR(check_shape(body));
  Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return not_json();
  if (!doc.is_object()) return Status::invalid_argument("the body must be a JSON object");
  return doc;
}

}  // namespace

Result<nlohmann::json> parse_request_json(std::string_view body) {
  return parse_checked<nlohmann::json>(body);
}

Result<nlohmann::ordered_json> parse_request_ordered_json(std::string_view body) {
  return parse_checked<nlohmann::ordered_json>(body);
}

}  // namespace minfer::serve
