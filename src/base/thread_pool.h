// A persistent pool of worker threads for work run in parallel on the host:
// the CPU backend's kernels, the engine's sampling, the bandwidth probe.
//
// Contract: the workers are created once, in the constructor, and joined in
// the destructor; parallel_for never spawns threads. parallel_for(n, fn) calls
// fn(begin, end, thread) over disjoint ranges that cover [0, n) exactly once
// and returns when every range is done. `thread` is in [0, num_threads()) and
// identifies the calling thread for the duration of one range, so it can
// index per-thread scratch. The calling thread takes part (it is thread 0).
// A pool of 1 thread, n <= 1, or a call made from inside a task (nesting)
// runs inline on the caller. Ranges are handed out dynamically in chunks, so
// uneven work balances. fn must not throw.
//
// Starting: the constructor never throws. When the system refuses a thread
// (its limit on threads or memory), the pool keeps the workers it got, so it
// still works, and start_status() names the failure; create() turns that into
// an error for callers that asked for an exact count.
//
// Cost: one wake-up and one completion wait per call; idle workers spin
// briefly (so back-to-back calls in a forward pass stay cheap) and then block
// on a condition variable (so an idle pool uses no CPU).
//
// Threading: one parallel_for at a time per pool (calls from several threads
// are serialized by a mutex). The pool must outlive every call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/status.h"

namespace minfer {

class ThreadPool {
 public:
  // num_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 1);
  // A pool of exactly num_threads (<= 0: one per hardware thread), or an error
  // naming the thread the system refused and why.
  static Result<std::unique_ptr<ThreadPool>> create(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Ok, or why fewer threads than asked for were started.
  const Status& start_status() const { return start_status_; }

  template <typename Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n_tasks, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t begin, int64_t end, int thread) {
          (*static_cast<F*>(ctx))(begin, end, thread);
        });
  }

 private:
  using Trampoline = void (*)(void* ctx, int64_t begin, int64_t end, int thread);

  void run(int64_t n_tasks, void* ctx, Trampoline call);
  void worker_main(int thread);
  void work_on_job(uint64_t generation, int thread);

  int num_threads_;
  Status start_status_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // serializes parallel_for callers

  // The current job. `claim_` packs the job's generation (high bits) with the
  // next unclaimed task index, so a worker that wakes up late can never claim
  // a task of a newer job by mistake; the caller therefore waits only for
  // claimed tasks to finish (`done_`), never for workers to check in.
  std::atomic<void*> ctx_{nullptr};
  std::atomic<Trampoline> call_{nullptr};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<int64_t> chunk_{1};
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers blocked on wake_cv_

  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
};

}  // namespace minfer
