// The server's engine thread: one runtime::Engine driven by one thread, fed
// by the HTTP handlers' threads through per-request channels.
//
// Contract:
//   - submit(requests) hands one HTTP request's sequences (its n choices) to
//     the engine thread and returns their channel at once; each choice's
//     tokens and its end arrive there in order, tagged with its index. A
//     request the engine refuses (bad tokens, a prompt past the context,
//     more pages than the pool) ends at once with that Status, its other
//     choices cancelled. Choices after the first join once the first has
//     computed the prompt, and take its pages from the prefix cache.
//   - The queue is bounded: with max_waiting sequences already waiting for a
//     slot, submit() ends the channel at once with an unavailable Status
//     (HTTP 503; the server adds Retry-After).
//   - A handler that stops listening (a client gone) calls cancel(): the
//     engine cancels its sequences at its next step and their cells return.
//   - drain() refuses new work (unavailable) and lets what runs finish;
//     idle() says when nothing is left. stop() ends the thread after the
//     current step; every open channel ends with an unavailable Status. The
//     destructor stops.
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
    int choice = 0;
    bool has_token = false;
    int32_t token = -1;
    float logprob = 0;
    std::vector<runtime::TokenLogprob> top_logprobs;
    runtime::FinishReason finished = runtime::FinishReason::kNone;
    int64_t prompt_tokens = 0;
    // Speculative decoding, so far for this choice (SequenceEvent's counts).
    int64_t drafted = 0, draft_accepted = 0;
  };
  explicit Channel(int n_choices = 1) : n_choices_(n_choices) {}
  // Waits (at most `timeout_ms`) for items; false when none came in time.
  // After the end, `items` is empty and done() is true.
  bool wait(std::vector<Item>& items, int timeout_ms);
  bool done() const;
  Status status() const;    // why it ended early (ok for a normal end)
  void cancel();            // every choice
  void cancel(int choice);  // one (its stop string came)
  bool cancelled(int choice) const;

  // The engine thread's side.
  void push(const Item& item);
  void fail(Status s);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  int n_choices_;
  int ended_ = 0;  // choices that have ended
  bool done_ = false;
  bool cancelled_ = false;
  std::vector<bool> cancelled_choices_ = std::vector<bool>(static_cast<size_t>(n_choices_), false);
  Status status_;
};

class Scheduler {
 public:
  Scheduler(std::unique_ptr<runtime::Engine> engine, int64_t max_waiting);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::shared_ptr<Channel> submit(std::vector<runtime::Request> requests);
  void drain();
  bool idle() const;
  void stop();
  runtime::EngineStats stats() const;

 private:
  struct Job {
    std::vector<runtime::Request> requests;
    std::shared_ptr<Channel> channel;
  };
  struct Live {
    runtime::SequenceId id;
    std::shared_ptr<Channel> channel;
    int choice;
  };
  void loop();
  // The other choices of a request wait until its first has computed the
  // prompt (its first event): then they take the prompt's pages from the
  // prefix cache instead of each computing it again.
  struct Deferred {
    runtime::SequenceId first;
    std::vector<runtime::Request> rest;  // choices 1..n-1
    std::shared_ptr<Channel> channel;
  };
  void admit(std::vector<Job>& jobs);
  Status add(std::vector<runtime::Request>& requests, size_t first_choice,
             const std::shared_ptr<Channel>& channel);
  void release_deferred(runtime::SequenceId first);
  void deliver(const std::vector<runtime::SequenceEvent>& events);

  std::unique_ptr<runtime::Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> incoming_;
  std::vector<Live> live_;          // engine thread only
  std::vector<Deferred> deferred_;  // engine thread only
  runtime::EngineStats stats_;
  int64_t max_waiting_;
  int64_t incoming_sequences_ = 0;  // in incoming_
  bool draining_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace minfer::serve
