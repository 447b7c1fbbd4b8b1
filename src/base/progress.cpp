#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

namespace minfer {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, bool enabled, std::string label, uint64_t total_bytes,
                         std::chrono::steady_clock::duration min_interval)
    : out_(out),
      enabled_(enabled && out != nullptr),
      label_(std::move(label)),
      total_(total_bytes),
      min_interval_(min_interval) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

bool ProgressBar::shown_on(std::FILE* out, uint64_t total_bytes, uint64_t min_bytes) {
  if (out == nullptr || total_bytes <= min_bytes) return false;
  const int fd = fileno(out);
  return fd >= 0 && isatty(fd) == 1;
}

std::string ProgressBar::format(std::string_view label, uint64_t done, uint64_t total, int width) {
  done = std::min(done, total);
  width = std::max(width, 1);
  // An empty job is complete.
  const uint64_t filled = total == 0 ? static_cast<uint64_t>(width) : done * width / total;
  const uint64_t percent = total == 0 ? 100 : done * 100 / total;
  std::string bar(static_cast<size_t>(width), ' ');
  for (uint64_t i = 0; i < filled; ++i) bar[i] = '=';
  if (filled < static_cast<uint64_t>(width) && filled > 0) bar[filled - 1] = '>';
  char numbers[96];
  std::snprintf(
      numbers, sizeof(numbers), "] %3llu%% %llu/%llu MiB", static_cast<unsigned long long>(percent),
      static_cast<unsigned long long>(done / kMiB), static_cast<unsigned long long>(total / kMiB));
  std::string line(label);
  line += " [";
  line += bar;
  line += numbers;
  return line;
}

void ProgressBar::update(uint64_t done_bytes) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < min_interval_) return;
  last_draw_ = now;
  draw(done_bytes);
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw(total_);
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::draw(uint64_t done) {
  drawn_ = true;
  const std::string line = format(label_, done, total_);
  std::fputc('\r', out_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace minfer
