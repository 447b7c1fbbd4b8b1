// Ctrl-C for the interactive commands: the first SIGINT asks the running
// generation to stop (the command finishes its reply, prints its summary and
// carries on or returns); a second one before clear() ends the process at
// once with status 130, as a shell expects.
//
// With Signals::kIntAndTerm, SIGTERM counts as a SIGINT (a server's
// graceful stop; a second signal of either kind ends the process).
// Contract: an Interrupts object installs its handler for its lifetime and
// restores the previous one when destroyed; one at a time per process.
// requested() says whether a first SIGINT came since the last clear().
// Threading: the flag is a lock-free atomic, safe to read from any thread.
#pragma once

#include <csignal>

namespace minfer::cli {

class Interrupts {
 public:
  enum class Signals { kInt, kIntAndTerm };
  explicit Interrupts(Signals which = Signals::kInt);
  ~Interrupts();
  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

  bool requested() const;
  void clear();

 private:
  Signals which_;
  struct sigaction previous_ {};
  struct sigaction previous_term_ {};
};

}  // namespace minfer::cli
