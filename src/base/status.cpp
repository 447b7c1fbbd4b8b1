#include "base/status.h"

#include <iterator>

namespace minfer {

const char* status_code_name(StatusCode code) {
  static constexpr const char* kNames[] = {
      "ok",          "unknown",       "invalid argument",
      "not found",   "out of range",  "resource exhausted",
      "unavailable", "unimplemented", "I/O error",
      "internal",
  };
  static_assert(std::size(kNames) == static_cast<size_t>(StatusCode::kInternal) + 1);
  const auto i = static_cast<size_t>(code);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace minfer
