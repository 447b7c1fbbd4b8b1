// A one-line progress bar for long loads, drawn on a terminal:
//   "minfer: CUDA: uploading weights [============>                 ]  45% 812/1804 MiB"
// redrawn in place with '\r' and ended with '\n'.
//
// Contract:
//   - A disabled bar writes nothing at all; decide with shown_on() (a
//     terminal, and enough work to be worth a bar) so that logs and pipes get
//     no '\r' lines.
//   - update(done) redraws the line when at least `min_interval` passed since
//     the previous draw (the first update always draws), so a caller may call
//     it as often as it likes; done is clamped to total.
//   - finish() draws the complete line (done = total) and ends it with '\n',
//     once; later calls and updates do nothing. A bar destroyed unfinished
//     after it drew ends its line with '\n' (no 100%), so that an error
//     printed after an aborted load starts on a fresh line.
//   - format() is the pure formatting used for every draw (no '\r'): the label,
//     a bar of `width` cells ('=' done, '>' at the head, ' ' to do), the
//     percentage floored, and done/total in whole MiB (floored).
// Threading: one bar per thread; the FILE* is written without extra locking.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace minfer {

class ProgressBar {
 public:
  static constexpr int kDefaultWidth = 30;
  static constexpr std::chrono::milliseconds kDefaultInterval{100};  // <= 10 redraws a second

  ProgressBar(std::FILE* out, bool enabled, std::string label, uint64_t total_bytes,
              std::chrono::steady_clock::duration min_interval = kDefaultInterval);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Whether `out` is a terminal and `total_bytes` exceeds `min_bytes`.
  static bool shown_on(std::FILE* out, uint64_t total_bytes, uint64_t min_bytes);

  static std::string format(std::string_view label, uint64_t done, uint64_t total,
                            int width = kDefaultWidth);

  bool enabled() const { return enabled_; }
  void update(uint64_t done_bytes);
  void finish();

 private:
  void draw(uint64_t done);

  std::FILE* out_;
  bool enabled_;
  std::string label_;
  uint64_t total_;
  std::chrono::steady_clock::duration min_interval_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace minfer
