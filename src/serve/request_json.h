// The one door through which an HTTP request body becomes JSON: a body that
// nests arrays and objects past kMaxJsonDepth is refused before any level past
// it is built, so that nothing downstream (nlohmann's recursive copies and
// comparisons, the schema compiler, the chat template) ever sees a document
// deep enough to exhaust a thread's stack.
//
// Contract:
//   - parse_request_json() / parse_request_ordered_json() return the body's
//     top-level object (ordered_json keeps the keys in the order written).
//   - Errors, all kInvalidArgument, and nothing returned but the error:
//       deeper than kMaxJsonDepth: "the body nests arrays and objects deeper
//         than 64 levels" (the top-level object is level 1);
//       not JSON, or invalid UTF-8: "the body is not valid JSON (or not valid
//         UTF-8)";
//       valid JSON but not an object: "the body must be a JSON object".
//   - The parse is base/json.h's (max_depth kMaxJsonDepth): one pass, linear
//     in the body for both document types. A repeated key is accepted, the
//     last one winning. No exception escapes.
// Threading: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "base/status.h"

namespace minfer::serve {

inline constexpr int kMaxJsonDepth = 64;

[[nodiscard]] Result<nlohmann::json> parse_request_json(std::string_view body);
[[nodiscard]] Result<nlohmann::ordered_json> parse_request_ordered_json(std::string_view body);

}  // namespace minfer::serve
