#include "base/thread_pool.h"

#include <algorithm>
#include <exception>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace minfer {
namespace {

// Index of the pool thread running a task on this OS thread, or -1. Lets a
// nested parallel_for run inline with the right per-thread scratch index.
thread_local int tls_task_thread = -1;

// Long enough to bridge the gap between consecutive kernels of one forward
// pass, short enough that an idle pool stops burning a shared core quickly.
constexpr int kSpinIterations = 4000;

constexpr int kIndexBits = 40;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint64_t kGenerationMask = (uint64_t{1} << (64 - kIndexBits)) - 1;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  const int wanted = std::max(1, num_threads);
  num_threads_ = wanted;
  try {
    workers_.reserve(static_cast<size_t>(wanted - 1));
    for (int t = 1; t < wanted; ++t) workers_.emplace_back([this, t] { worker_main(t); });
  } catch (const std::exception& e) {  // std::system_error, or bad_alloc from reserve
    // The workers that did start only ever read the job fields; they take
    // thread indices 1..workers_.size(), all below the reduced count.
    num_threads_ = static_cast<int>(workers_.size()) + 1;
    start_status_ = Status::resource_exhausted(
        "cannot start CPU thread " + std::to_string(num_threads_ + 1) + " of " +
        std::to_string(wanted) + ": " + e.what() + " (ask for fewer with -t)");
  }
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(int num_threads) {
  auto pool = std::make_unique<ThreadPool>(num_threads);
  if (!pool->start_status().is_ok()) return pool->start_status();
  return pool;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    stop_.store(true);
  }
  wake_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::run(int64_t n_tasks, void* ctx, Trampoline call) {
  if (n_tasks <= 0) return;
  if (num_threads_ == 1 || n_tasks == 1 || tls_task_thread >= 0) {
    const int thread = tls_task_thread >= 0 ? tls_task_thread : 0;
    call(ctx, 0, n_tasks, thread);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  const uint64_t gen = (generation_.load(std::memory_order_relaxed) + 1) & kGenerationMask;
  // Retire the previous job before touching its fields: a worker still
  // looking at it reads the fields below only after this store (all
  // seq_cst), so its claim attempt fails instead of taking a task of the new
  // job under the old generation.
  claim_.store(gen << kIndexBits);
  ctx_.store(ctx);
  call_.store(call);
  n_tasks_.store(n_tasks);
  // Several chunks per thread so a thread that lost its core to another
  // process does not hold up the whole call.
  chunk_.store(std::max<int64_t>(1, n_tasks / (static_cast<int64_t>(num_threads_) * 4)));
  done_.store(0);
  generation_.store(gen);  // seq_cst: publishes the job, pairs with sleepers_
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_cv_.notify_all();
  }

  work_on_job(gen, 0);

  for (int i = 0; i < kSpinIterations; ++i) {
    if (done_.load(std::memory_order_acquire) == n_tasks) return;
    cpu_relax();
  }
  std::unique_lock<std::mutex> lock(done_mutex_);
  done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == n_tasks; });
}

void ThreadPool::work_on_job(uint64_t gen, int thread) {
  tls_task_thread = thread;
  for (;;) {
    uint64_t c = claim_.load();
    int64_t begin = 0;
    int64_t end = 0;
    for (;;) {
      if ((c >> kIndexBits) != gen) break;  // a newer job: ours is fully claimed
      const int64_t n = n_tasks_.load();
      begin = static_cast<int64_t>(c & kIndexMask);
      if (begin >= n) break;
      end = std::min(n, begin + chunk_.load());
      if (claim_.compare_exchange_weak(c, (gen << kIndexBits) | static_cast<uint64_t>(end))) {
        break;
      }
      end = 0;
    }
    if (end <= begin) break;
    // A successful claim pins the job: the caller cannot return, and so cannot
    // publish a new job, before this range is counted in done_.
    call_.load()(ctx_.load(), begin, end, thread);
    const int64_t n = n_tasks_.load();
    if (done_.fetch_add(end - begin, std::memory_order_acq_rel) + (end - begin) == n &&
        thread != 0) {
      std::lock_guard<std::mutex> lock(done_mutex_);
      done_cv_.notify_one();
    }
  }
  tls_task_thread = -1;
}

void ThreadPool::worker_main(int thread) {
  uint64_t seen = 0;
  for (;;) {
    bool ready = false;
    for (int i = 0; i < kSpinIterations && !ready; ++i) {
      ready = generation_.load(std::memory_order_acquire) != seen || stop_.load();
      if (!ready) cpu_relax();
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(wake_mutex_);
      sleepers_.fetch_add(1);  // seq_cst: the caller either sees us or we see its job
      wake_cv_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    work_on_job(seen, thread);
  }
}

}  // namespace minfer
