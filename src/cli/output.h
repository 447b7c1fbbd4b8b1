// Standard output for the commands, with every write checked.
//
// Contract: write_stdout() writes `text` and flushes it (streamed tokens show
// at once). It returns an error naming standard output and the system's
// reason: EPIPE when the reader has gone (with SIGPIPE ignored; otherwise the
// signal ends the process as usual), ENOSPC on a full disk or /dev/full, EIO.
// Once a write has failed, every later call fails at once with the same error,
// so a command stops at its next write instead of computing for no reader.
// finish_stdout() flushes what printf left buffered and reports a failure of
// any earlier write as well; main() calls it after every command.
// Threading: the process's stdout; call from the command's thread only.
#pragma once

#include <string_view>

#include "base/status.h"

namespace minfer::cli {

Status write_stdout(std::string_view text);
Status finish_stdout();

}  // namespace minfer::cli
