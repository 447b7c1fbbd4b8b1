#include "base/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace minfer {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// Everything written to `f` so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::string out;
  std::rewind(f);
  char buf[256];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST(ProgressBar, FormatsLabelBarPercentAndMiB) {
  EXPECT_EQ(ProgressBar::format("up", 0, 100 * kMiB),
            "up [" + std::string(30, ' ') + "]   0% 0/100 MiB");
  EXPECT_EQ(ProgressBar::format("up", 50 * kMiB, 100 * kMiB),
            "up [" + std::string(14, '=') + ">" + std::string(15, ' ') + "]  50% 50/100 MiB");
  EXPECT_EQ(ProgressBar::format("up", 100 * kMiB, 100 * kMiB),
            "up [" + std::string(30, '=') + "] 100% 100/100 MiB");
  EXPECT_EQ(ProgressBar::format("minfer: CUDA: uploading weights", 812 * kMiB, 1804 * kMiB, 10),
            "minfer: CUDA: uploading weights [===>      ]  45% 812/1804 MiB");
}

TEST(ProgressBar, FloorsAndClamps) {
  // 99.9% is not shown as 100%, and part of a MiB is not counted.
  EXPECT_EQ(ProgressBar::format("x", 999, 1000, 10), "x [========> ]  99% 0/0 MiB");
  EXPECT_EQ(ProgressBar::format("x", 2 * kMiB - 1, 3 * kMiB, 3), "x [>  ]  66% 1/3 MiB");
  // Past the end counts as done; an empty job is complete.
  EXPECT_EQ(ProgressBar::format("x", 5 * kMiB, 4 * kMiB, 4), "x [====] 100% 4/4 MiB");
  EXPECT_EQ(ProgressBar::format("x", 0, 0, 4), "x [====] 100% 0/0 MiB");
}

TEST(ProgressBar, DisabledWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, /*enabled=*/false, "up", 10 * kMiB, std::chrono::milliseconds(0));
    EXPECT_FALSE(bar.enabled());
    bar.update(kMiB);
    bar.update(5 * kMiB);
    bar.finish();
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(ProgressBar, RedrawsInPlaceAndEndsWithNewlineOnce) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressBar bar(f, /*enabled=*/true, "up", 4 * kMiB, std::chrono::milliseconds(0));
  bar.update(kMiB);
  bar.update(2 * kMiB);
  bar.finish();
  bar.finish();
  bar.update(3 * kMiB);
  EXPECT_EQ(contents(f), "\r" + ProgressBar::format("up", kMiB, 4 * kMiB) + "\r" +
                             ProgressBar::format("up", 2 * kMiB, 4 * kMiB) + "\r" +
                             ProgressBar::format("up", 4 * kMiB, 4 * kMiB) + "\n");
  std::fclose(f);
}

TEST(ProgressBar, RateLimitsRedrawsButAlwaysDrawsTheFirstAndTheLast) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  // An interval no test run reaches: only the first update draws.
  ProgressBar bar(f, /*enabled=*/true, "up", 4 * kMiB, std::chrono::hours(24));
  bar.update(kMiB);
  bar.update(2 * kMiB);
  bar.update(3 * kMiB);
  EXPECT_EQ(contents(f), "\r" + ProgressBar::format("up", kMiB, 4 * kMiB));
  std::fseek(f, 0, SEEK_END);
  bar.finish();
  EXPECT_EQ(contents(f), "\r" + ProgressBar::format("up", kMiB, 4 * kMiB) + "\r" +
                             ProgressBar::format("up", 4 * kMiB, 4 * kMiB) + "\n");
  std::fclose(f);
}

TEST(ProgressBar, AnAbandonedBarEndsItsLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, /*enabled=*/true, "up", 4 * kMiB, std::chrono::milliseconds(0));
    bar.update(kMiB);
  }
  EXPECT_EQ(contents(f), "\r" + ProgressBar::format("up", kMiB, 4 * kMiB) + "\n");
  {
    // Nothing drawn, nothing to end.
    ProgressBar bar(f, /*enabled=*/true, "up", 4 * kMiB, std::chrono::milliseconds(0));
  }
  EXPECT_EQ(contents(f), "\r" + ProgressBar::format("up", kMiB, 4 * kMiB) + "\n");
  std::fclose(f);
}

TEST(ProgressBar, ShownOnlyOnATerminalAndAboveTheThreshold) {
  EXPECT_FALSE(ProgressBar::shown_on(nullptr, 100 * kMiB, 64 * kMiB));
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(ProgressBar::shown_on(file, 100 * kMiB, 64 * kMiB));
  std::fclose(file);

  // A pseudo-terminal stands in for stderr on a console.
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
    if (master >= 0) close(master);
    GTEST_SKIP() << "no pseudo-terminal available";
  }
  const char* name = ptsname(master);
  ASSERT_NE(name, nullptr);
  std::FILE* tty = std::fopen(name, "w");
  ASSERT_NE(tty, nullptr);
  EXPECT_TRUE(ProgressBar::shown_on(tty, 100 * kMiB, 64 * kMiB));
  EXPECT_FALSE(ProgressBar::shown_on(tty, 64 * kMiB, 64 * kMiB));
  std::fclose(tty);
  close(master);
}

}  // namespace
}  // namespace minfer
