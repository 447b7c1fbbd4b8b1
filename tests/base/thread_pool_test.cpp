#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace minfer {
namespace {

void check_covers_exactly_once(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad_thread{false};
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
    if (thread < 0 || thread >= pool.num_threads() || begin >= end) bad_thread = true;
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  EXPECT_FALSE(bad_thread.load());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "task " << i;
}

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 10007}) check_covers_exactly_once(pool, n);
  }
}

// Back-to-back calls of different sizes: a worker that is still finishing one
// call must never take part of the next under the old call's bookkeeping.
TEST(ThreadPool, ManyRepeatedCallsStayCorrect) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(97);
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 97;
    for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0);
    std::atomic<bool> out_of_range{false};
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
      if (begin < 0 || end > n) out_of_range = true;
      for (int64_t i = begin; i < end && i < 97; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    ASSERT_FALSE(out_of_range.load()) << "call " << call;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "call " << call << " task " << i;
    }
  }
}

TEST(ThreadPool, SingleThreadRunsInlineOnCaller) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  bool same = true;
  pool.parallel_for(50, [&](int64_t, int64_t, int thread) {
    same = same && std::this_thread::get_id() == caller && thread == 0;
  });
  EXPECT_TRUE(same);
}

TEST(ThreadPool, PerThreadScratchIndexIsExclusive) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> in_use(2);
  std::atomic<bool> clash{false};
  pool.parallel_for(2000, [&](int64_t begin, int64_t end, int thread) {
    if (in_use[thread].fetch_add(1) != 0) clash = true;
    volatile int64_t sink = 0;
    for (int64_t i = begin; i < end; ++i) sink = sink + i;
    in_use[thread].fetch_sub(1);
  });
  EXPECT_FALSE(clash.load());
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> inner{0};
  pool.parallel_for(4, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      pool.parallel_for(10, [&](int64_t b, int64_t e, int) { inner.fetch_add(e - b); });
    }
  });
  EXPECT_EQ(inner.load(), 40);
}

TEST(ThreadPool, IdlePoolWakesUpAgain) {
  ThreadPool pool(2);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let workers block
    check_covers_exactly_once(pool, 1000);
  }
}

}  // namespace
}  // namespace minfer
