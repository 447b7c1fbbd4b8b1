// The words of the device error codes (contract in backend/device_errors.h).
#include "backend/device_errors.h"

#include <string>

namespace minfer::backend {
namespace {

// One row per code: the message is value_is + word 1 (as the i32 it was)
// [+ bound_is + word 2] + tail; without bound_is the code has no bound.
struct ErrorWords {
  uint32_t code;
  StatusCode kind;
  const char* value_is;
  const char* bound_is;
  const char* tail;
};

constexpr ErrorWords kErrorWords[] = {
    {MINFER_ERR_ROW_ID, StatusCode::kInvalidArgument, "token id ", " outside [0, ",
     ") (or a row id of gather_rows)"},
    {MINFER_ERR_CACHE_ROW, StatusCode::kOutOfRange, "position ", " outside the KV cache of ",
     " rows"},
    {MINFER_ERR_POSITION, StatusCode::kOutOfRange, "position, slot or page ",
     " outside the KV cache or its tables (bound ", ")"},
    {MINFER_ERR_ROUTER_NAN, StatusCode::kInvalidArgument, "NaN router logit in token ", " (of ",
     " experts)"},
    {MINFER_ERR_EXPERT_ID, StatusCode::kInvalidArgument, "expert id ", " outside [0, ", ")"},
    {MINFER_ERR_NONFINITE_KV, StatusCode::kInvalidArgument,
     "non-finite value stored into the q8_0 KV cache row ", nullptr, ""},
};

}  // namespace

Status device_error(const uint32_t words[MINFER_ERR_WORDS], std::string_view backend,
                    std::string_view trail) {
  const std::string value = std::to_string(static_cast<int32_t>(words[1]));
  const std::string bound = std::to_string(words[2]);
  StatusCode kind = StatusCode::kInternal;
  std::string what =
      "error code " + std::to_string(words[0]) + " (value " + value + ", bound " + bound + ")";
  for (const ErrorWords& e : kErrorWords) {
    if (e.code != words[0]) continue;
    kind = e.kind;
    what = e.value_is + value + (e.bound_is != nullptr ? e.bound_is + bound : "") + e.tail;
  }
  return Status::error(
      kind, std::string(backend) + ": a kernel reported " + what + "; " + std::string(trail));
}

}  // namespace minfer::backend
