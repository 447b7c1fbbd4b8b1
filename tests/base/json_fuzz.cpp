// Fuzzes the JSON reader: any input must yield a value or an error, never a
// crash, hang or sanitizer report; accepted strings must survive a quote/parse
// round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/json.h"

namespace {

void check_strings(const minfer::JsonValue& v) {
  if (v.is_string()) {
    auto again = minfer::parse_json(minfer::json_quote(v.as_string()));
    if (!again.is_ok() || again->as_string() != v.as_string()) __builtin_trap();
  } else if (v.is_array()) {
    for (const auto& item : v.items()) check_strings(item);
  } else if (v.is_object()) {
    for (const auto& [key, value] : v.members()) check_strings(value);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  minfer::JsonParseOptions options;
  options.max_depth = 64;
  auto v = minfer::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), options);
  if (v.is_ok()) check_strings(*v);
  return 0;
}
