// Fuzzes base/json.h: any input must yield a document or an error, never a
// crash, hang, exception or sanitizer report. An accepted document must obey
// the contract (no level past the limit), serialise and parse back to itself,
// and each of its strings must survive a json_quote/parse round trip. The
// input's length picks the options (not its bytes, which JSON constrains), so
// the duplicate-key and ordered paths are fuzzed too; json_quote sees the raw
// bytes, valid or not.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json.h"

namespace {

constexpr int kMaxDepth = 64;

// Depth of `v` (a scalar is 0), checked on the way so that a bug that let a
// deep document through cannot overflow this stack either.
template <typename Json>
int depth_of(const Json& v, int depth) {
  if (!v.is_structured()) return depth;
  if (depth >= kMaxDepth) __builtin_trap();
  int deepest = depth + 1;
  for (const Json& child : v) deepest = std::max(deepest, depth_of(child, depth + 1));
  return deepest;
}

template <typename Json>
void check_strings(const Json& v) {
  if (v.is_string()) {
    const auto& s = v.template get_ref<const std::string&>();
    auto again = minfer::parse_json(minfer::json_quote(s));
    if (!again.is_ok() || !again->is_string() || again->template get<std::string>() != s) {
      __builtin_trap();
    }
  } else if (v.is_structured()) {
    for (const Json& child : v) check_strings(child);
  }
}

template <typename Json>
void check_document(const Json& v, const minfer::JsonParseOptions& options) {
  depth_of(v, 0);
  check_strings(v);
  const std::string text = v.dump(-1, ' ', false, Json::error_handler_t::strict);
  auto again = minfer::parse_json(text, options);
  if (!again.is_ok() || *again != nlohmann::json(v)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Any bytes quote to valid JSON.
  if (!minfer::parse_json(minfer::json_quote(text)).is_ok()) __builtin_trap();
  minfer::JsonParseOptions options;
  options.max_depth = kMaxDepth;
  options.allow_duplicate_keys = (size & 1) != 0;
  if ((size & 2) != 0) {
    if (auto v = minfer::parse_ordered_json(text, options); v.is_ok()) check_document(*v, options);
  } else {
    if (auto v = minfer::parse_json(text, options); v.is_ok()) check_document(*v, options);
  }
  return 0;
}
