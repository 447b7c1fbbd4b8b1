// The log sink: replaceable, level-filtered, serialized.
#include "base/log.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace minfer {
namespace {

// Restores the default sink and level when a test ends.
struct SinkGuard {
  ~SinkGuard() {
    set_log_sink({});
    set_min_log_level(LogLevel::kInfo);
  }
};

TEST(Log, ReplacedSinkReceivesMessagesWithTheirLevel) {
  SinkGuard guard;
  std::vector<std::pair<LogLevel, std::string>> got;
  set_log_sink([&](LogLevel l, std::string_view m) { got.emplace_back(l, std::string(m)); });
  log_info("CUDA device 0: H200");
  log_warning("CUDA not used: no device");
  log_message(LogLevel::kDebug, "dropped below the minimum level");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, LogLevel::kInfo);
  EXPECT_EQ(got[0].second, "CUDA device 0: H200");
  EXPECT_EQ(got[1].first, LogLevel::kWarning);
  set_min_log_level(LogLevel::kDebug);
  log_message(LogLevel::kDebug, "now kept");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_STREQ(log_level_name(got[2].first), "debug");
  set_min_log_level(LogLevel::kError);
  log_warning("dropped");
  EXPECT_EQ(got.size(), 3u);
}

TEST(Log, CallsFromManyThreadsAreSerialized) {
  SinkGuard guard;
  int in_sink = 0, overlaps = 0, count = 0;
  set_log_sink([&](LogLevel, std::string_view) {
    if (++in_sink > 1) ++overlaps;
    ++count;
    --in_sink;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i) log_info("message");
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(count, 2000);
  EXPECT_EQ(overlaps, 0);
}

TEST(Log, DefaultSinkEscapesWhatWouldActOnTheTerminal) {
  SinkGuard guard;
  ::testing::internal::CaptureStderr();
  log_warning("architecture '\x1b]0;x\x07'");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "minfer: architecture '\\x1b]0;x\\x07'\n");
}

}  // namespace
}  // namespace minfer
