#include "cli/interrupt.h"

#include <unistd.h>

#include <atomic>

namespace minfer::cli {
namespace {

std::atomic<int> g_count{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_sigint(int) {
  if (g_count.fetch_add(1) >= 1) _exit(130);  // async-signal-safe
}

}  // namespace

Interrupts::Interrupts(Signals which) : which_(which) {
  g_count.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read waiting for input goes on waiting
  sigaction(SIGINT, &sa, &previous_);
  if (which_ == Signals::kIntAndTerm) sigaction(SIGTERM, &sa, &previous_term_);
}

Interrupts::~Interrupts() {
  sigaction(SIGINT, &previous_, nullptr);
  if (which_ == Signals::kIntAndTerm) sigaction(SIGTERM, &previous_term_, nullptr);
}

bool Interrupts::requested() const {
  return g_count.load() > 0;
}

void Interrupts::clear() {
  g_count.store(0);
}

}  // namespace minfer::cli
