#include "cli/output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace minfer::cli {
namespace {

// errno of the first failed write, 0 while none failed.
int g_stdout_errno = 0;

Status failure() {
  return Status::io_error(std::string("cannot write to standard output: ") +
                          std::strerror(g_stdout_errno));
}

// Records a failure seen now; errno is only trusted when the call just set it.
Status check(bool call_failed, int err) {
  if (g_stdout_errno == 0 && (call_failed || std::ferror(stdout))) g_stdout_errno = err ? err : EIO;
  return g_stdout_errno == 0 ? Status::ok() : failure();
}

}  // namespace

Status write_stdout(std::string_view text) {
  if (g_stdout_errno != 0) return failure();
  errno = 0;
  const size_t n = std::fwrite(text.data(), 1, text.size(), stdout);
  if (n != text.size()) return check(true, errno);
  errno = 0;
  const bool failed = std::fflush(stdout) != 0;
  return check(failed, errno);
}

Status finish_stdout() {
  if (g_stdout_errno != 0) return failure();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0;
  return check(failed, errno);
}

}  // namespace minfer::cli
