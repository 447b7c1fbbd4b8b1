// The server's engine thread: one runtime::Engine driven by one thread, fed
// by the HTTP handlers' threads through per-request channels.
//
// Contract:
//   - submit(request) hands a request to the engine thread and returns its
//     channel at once; the request's tokens and its end arrive there in
//     order. A request the engine refuses (bad tokens, a prompt past the
//     context, more pages than the pool) ends at once with that Status.
//   - A handler that stops listening (a client gone) calls cancel(): the
//     engine cancels the sequence at its next step and its cells return.
//   - stop() ends the thread after the current step; every open channel ends
//     with an unavailable Status. The destructor stops.
// Threading: submit/cancel/stats from any thread; the Engine is touched only
// by the engine thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"

namespace minfer::serve {

// What one request receives: tokens as they come, then its end.
class Channel {
 public:
  struct Item {
    bool has_token = false;
    int32_t token = -1;
    runtime::FinishReason finished = runtime::FinishReason::kNone;
    int64_t prompt_tokens = 0;
  };
  // Waits (at most `timeout_ms`) for items; false when none came in time.
  // After the end, `items` is empty and done() is true.
  bool wait(std::vector<Item>& items, int timeout_ms);
  bool done() const;
  Status status() const;  // why it ended early (ok for a normal end)
  void cancel();
  bool cancelled() const;

  // The engine thread's side.
  void push(const Item& item);
  void fail(Status s);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool done_ = false;
  bool cancelled_ = false;
  Status status_;
};

class Scheduler {
 public:
  explicit Scheduler(std::unique_ptr<runtime::Engine> engine);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::shared_ptr<Channel> submit(runtime::Request request);
  void stop();
  runtime::EngineStats stats() const;

 private:
  struct Job {
    runtime::Request request;
    std::shared_ptr<Channel> channel;
  };
  struct Live {
    runtime::SequenceId id;
    std::shared_ptr<Channel> channel;
  };
  void loop();
  void admit(std::vector<Job>& jobs);

  std::unique_ptr<runtime::Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> incoming_;
  std::vector<Live> live_;  // engine thread only
  runtime::EngineStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace minfer::serve
