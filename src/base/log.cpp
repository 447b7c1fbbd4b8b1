#include "base/log.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <string>

#include "base/utf8.h"

namespace minfer {
namespace {

struct LogState {
  std::mutex mutex;
  LogSink sink;  // empty: the default stderr sink
  std::atomic<LogLevel> min_level{LogLevel::kInfo};
};

LogState& state() {
  static LogState s;
  return s;
}

void write_stderr(std::string_view message) {
  std::string line = "minfer: " + printable_text(message);
  if (line.back() != '\n') line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

const char* log_level_name(LogLevel level) {
  static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
  const auto i = static_cast<size_t>(level);
  return i < std::size(kNames) ? kNames[i] : "?";
}

void set_log_sink(LogSink sink) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sink = std::move(sink);
}

void set_min_log_level(LogLevel level) {
  state().min_level.store(level);
}

void log_message(LogLevel level, std::string_view message) {
  LogState& s = state();
  if (level < s.min_level.load()) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.sink) {
    s.sink(level, message);
  } else {
    write_stderr(message);
  }
}

}  // namespace minfer
