#include "serve/request_json.h"

#include <string>

#include "base/json.h"

namespace minfer::serve {
namespace {

Status not_json() {
  return Status::invalid_argument("the body is not valid JSON (or not valid UTF-8)");
}

// base/json.h's bounded parse, with the server's words for its refusals.
template <typename Json>
Result<Json> parse_checked(Result<Json> doc) {
  if (!doc.is_ok()) {
    if (doc.status().code() != StatusCode::kOutOfRange) return not_json();
    return Status::invalid_argument("the body nests arrays and objects deeper than " +
                                    std::to_string(kMaxJsonDepth) + " levels");
  }
  if (!doc->is_object()) return Status::invalid_argument("the body must be a JSON object");
  return doc;
}

JsonParseOptions body_options() {
  JsonParseOptions options;
  options.max_depth = kMaxJsonDepth;
  // As Python's json and other OpenAI-compatible servers do: the last one wins.
  options.allow_duplicate_keys = true;
  return options;
}

}  // namespace

Result<nlohmann::json> parse_request_json(std::string_view body) {
  return parse_checked(parse_json(body, body_options()));
}

Result<nlohmann::ordered_json> parse_request_ordered_json(std::string_view body) {
  return parse_checked(parse_ordered_json(body, body_options()));
}

}  // namespace minfer::serve
