// Status and Result<T>: errors as values.
//
// Contract: every fallible library function returns Status (no value) or
// Result<T> (a value or an error). Both are [[nodiscard]]. An error carries a
// human-readable message that names the thing that was wrong (file, key,
// tensor, node, value); callers prepend context with Status::with_context().
// Library code never exits or aborts on bad input; the CLI turns an error into
// a message on stderr and a non-zero exit code.
//
// Threading: plain values, no shared state.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace minfer {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

  // "context: message" — for wrapping an inner error with where it happened.
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return Status::error(context + ": " + message_);
  }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
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
