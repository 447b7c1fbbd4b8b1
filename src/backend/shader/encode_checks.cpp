#include "backend/shader/encode_checks.h"

#include <string>

namespace minfer::shader {

uint64_t bound_bytes(const BufferRange& r) {
  if (r.buffer == nullptr) return 0;
  if (r.size != 0) return r.size;
  return r.offset < r.buffer->capacity() ? r.buffer->capacity() - r.offset : 0;
}

Status needs(std::string_view op, std::string_view what, const BufferRange& r, uint64_t bytes) {
  if (r.buffer == nullptr) {
    return Status::invalid_argument(std::string(op) + ": no buffer for " + std::string(what));
  }
  if (bound_bytes(r) < bytes) {
    return Status::invalid_argument(std::string(op) + ": " + std::string(what) + " needs " +
                                    std::to_string(bytes) + " bytes, its binding has " +
                                    std::to_string(bound_bytes(r)));
  }
  return Status::ok();
}

Status positive(std::string_view op, std::string_view what, int64_t v) {
  if (v <= 0 || v > kMaxIndex) {
    return Status::invalid_argument(std::string(op) + ": " + std::string(what) + " = " +
                                    std::to_string(v) + " (must be in 1.." +
                                    std::to_string(kMaxIndex) + ")");
  }
  return Status::ok();
}

}  // namespace minfer::shader
