// Status and Result<T>: errors as values.
//
// Contract: every fallible library function returns Status (no value) or
// Result<T> (a value or an error). Both are [[nodiscard]]. An error carries a
// human-readable message that names the thing that was wrong (file, key,
// tensor, node, value) and a StatusCode saying what kind of failure it is, so
// that callers branch on the kind (an HTTP server answers 400, 503 or 500)
// rather than on message text; callers prepend context with
// Status::with_context(), which keeps the code. Library code never exits or
// aborts on bad input; the CLI turns an error into a message on stderr and a
// non-zero exit code.
//
// Threading: plain values, no shared state.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace minfer {

// The kinds of failure (after absl's and LevelDB's codes).
enum class StatusCode : uint8_t {
  kOk,
  kUnknown,            // not classified (Status::error): treat as internal
  kInvalidArgument,    // bad input: a flag, a request field, a malformed file or text
  kNotFound,           // a file, tensor or key that is not there
  kOutOfRange,         // a valid value past a limit: a prompt longer than the context
  kResourceExhausted,  // memory, threads, the KV pool: may succeed with less or later
  kUnavailable,        // a device or service that cannot be used now
  kUnimplemented,      // well-formed but not supported here: an architecture, a weight type
  kIoError,            // a read or write the system refused (full disk, closed pipe)
  kInternal,           // an invariant of minfer broke: a bug
};

// "invalid argument", "out of range", ... for logs and messages.
const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status ok() { return Status(); }
  static Status error(StatusCode code, std::string message) {
    assert(code != StatusCode::kOk && "an error needs a failure code");
    return Status(code, std::move(message));
  }
  static Status error(std::string message) {
    return error(StatusCode::kUnknown, std::move(message));
  }
  static Status invalid_argument(std::string m) {
    return error(StatusCode::kInvalidArgument, std::move(m));
  }
  static Status not_found(std::string m) { return error(StatusCode::kNotFound, std::move(m)); }
  static Status out_of_range(std::string m) { return error(StatusCode::kOutOfRange, std::move(m)); }
  static Status resource_exhausted(std::string m) {
    return error(StatusCode::kResourceExhausted, std::move(m));
  }
  static Status unavailable(std::string m) { return error(StatusCode::kUnavailable, std::move(m)); }
  static Status unimplemented(std::string m) {
    return error(StatusCode::kUnimplemented, std::move(m));
  }
  static Status io_error(std::string m) { return error(StatusCode::kIoError, std::move(m)); }
  static Status internal(std::string m) { return error(StatusCode::kInternal, std::move(m)); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "context: message" with the same code — for wrapping an inner error with
  // where it happened.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  Status(StatusCode code, std::string message) : message_(std::move(message)), code_(code) {}
  std::string message_;
  StatusCode code_ = StatusCode::kOk;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).is_ok() && "Result constructed from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  T& value() & {
    assert(is_ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(is_ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }
  const std::string& message() const {
    static const std::string kEmpty;
    return is_ok() ? kEmpty : std::get<Status>(v_).message();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace minfer

#define MINFER_CONCAT_INNER_(a, b) a##b
#define MINFER_CONCAT_(a, b) MINFER_CONCAT_INNER_(a, b)

// Return the Status if it is an error.
#define MINFER_RETURN_IF_ERROR(expr)                    \
  do {                                                  \
    ::minfer::Status minfer_status_ = (expr);           \
    if (!minfer_status_.is_ok()) return minfer_status_; \
  } while (0)

// `MINFER_ASSIGN_OR_RETURN(auto x, f());` — bind the value or return the error.
#define MINFER_ASSIGN_OR_RETURN(lhs, expr) \
  MINFER_ASSIGN_OR_RETURN_IMPL_(MINFER_CONCAT_(minfer_result_, __LINE__), lhs, expr)
#define MINFER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.is_ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
