#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"

namespace minfer::serve {

bool Channel::wait(std::vector<Item>& items, int timeout_ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return !items_.empty() || done_; });
  items.assign(items_.begin(), items_.end());
  items_.clear();
  return !items.empty() || done_;
}

bool Channel::done() const {
  std::lock_guard lock(mu_);
  return done_ && items_.empty();
}

Status Channel::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void Channel::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

void Channel::cancel(int choice) {
  std::lock_guard lock(mu_);
  if (choice >= 0 && choice < n_choices_) cancelled_choices_[static_cast<size_t>(choice)] = true;
}

bool Channel::cancelled(int choice) const {
  std::lock_guard lock(mu_);
  return cancelled_ ||
         (choice >= 0 && choice < n_choices_ && cancelled_choices_[static_cast<size_t>(choice)]);
}

void Channel::push(const Item& item) {
  {
    std::lock_guard lock(mu_);
    items_.push_back(item);
    if (item.finished != runtime::FinishReason::kNone && ++ended_ == n_choices_) done_ = true;
  }
  cv_.notify_all();
}

void Channel::fail(Status s) {
  {
    std::lock_guard lock(mu_);
    status_ = std::move(s);
    done_ = true;
  }
  cv_.notify_all();
}

Scheduler::Scheduler(std::unique_ptr<runtime::Engine> engine, int64_t max_waiting)
    : engine_(std::move(engine)), max_waiting_(max_waiting), thread_([this] { loop(); }) {}

Scheduler::~Scheduler() {
  stop();
}

std::shared_ptr<Channel> Scheduler::submit(std::vector<runtime::Request> requests) {
  const auto n = static_cast<int64_t>(requests.size());
  auto ch = std::make_shared<Channel>(static_cast<int>(n));
  {
    std::lock_guard lock(mu_);
    if (stopping_ || draining_) {
      ch->fail(Status::unavailable("the server is shutting down"));
      return ch;
    }
    const int64_t waiting = incoming_sequences_ + stats_.waiting;
    if (waiting + n > max_waiting_) {
      ch->fail(Status::unavailable("the server is busy: " + std::to_string(waiting) +
                                   " sequences wait for a slot (at most " +
                                   std::to_string(max_waiting_) + "); retry later"));
      return ch;
    }
    incoming_sequences_ += n;
    incoming_.push_back({std::move(requests), ch});
  }
  cv_.notify_all();
  return ch;
}

void Scheduler::drain() {
  std::lock_guard lock(mu_);
  draining_ = true;
}

bool Scheduler::idle() const {
  std::lock_guard lock(mu_);
  return incoming_.empty() && stats_.waiting == 0 && stats_.running == 0;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

runtime::EngineStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// Adds requests[0..] as choices first_choice.. of `channel`; on a refusal the
// ones added are cancelled and the channel fails.
Status Scheduler::add(std::vector<runtime::Request>& requests, size_t first_choice,
                      const std::shared_ptr<Channel>& channel) {
  std::vector<runtime::SequenceId> ids;
  for (runtime::Request& r : requests) {
    auto id = engine_->add(std::move(r));
    if (!id) {
      for (runtime::SequenceId added : ids) engine_->cancel(added);
      channel->fail(id.status());
      return id.status();
    }
    ids.push_back(*id);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    live_.push_back({ids[i], channel, static_cast<int>(first_choice + i)});
  }
  return Status::ok();
}

void Scheduler::admit(std::vector<Job>& jobs) {
  for (Job& j : jobs) {
    std::vector<runtime::Request> rest;
    if (j.requests.size() > 1) {
      rest.assign(std::make_move_iterator(j.requests.begin() + 1),
                  std::make_move_iterator(j.requests.end()));
      j.requests.resize(1);
    }
    if (!add(j.requests, 0, j.channel)) continue;
    if (!rest.empty()) deferred_.push_back({live_.back().id, std::move(rest), j.channel});
  }
  jobs.clear();
}

void Scheduler::release_deferred(runtime::SequenceId first) {
  auto it = std::find_if(deferred_.begin(), deferred_.end(),
                         [&](const Deferred& d) { return d.first == first; });
  if (it == deferred_.end()) return;
  Deferred d = std::move(*it);
  deferred_.erase(it);
  if (d.channel->cancelled(0) || !d.channel->status()) {
    // Never started: their ends, so that the channel completes.
    for (size_t i = 0; i < d.rest.size(); ++i) {
      d.channel->push(
          {static_cast<int>(i + 1), false, -1, 0, {}, runtime::FinishReason::kCancelled, 0});
    }
    return;
  }
  (void)add(d.rest, 1, d.channel);  // a refusal fails the channel
}

void Scheduler::deliver(const std::vector<runtime::SequenceEvent>& events) {
  for (const runtime::SequenceEvent& e : events) {
    auto it = std::find_if(live_.begin(), live_.end(), [&](const Live& l) { return l.id == e.id; });
    if (it == live_.end()) continue;
    if (e.finished == runtime::FinishReason::kError) {
      it->channel->fail(Status::internal(e.error));
      it->channel->cancel();  // and its other choices
    } else {
      it->channel->push({it->choice, e.has_token, e.token, e.logprob, e.top_logprobs, e.finished,
                         e.prompt_tokens, e.drafted, e.draft_accepted});
    }
    const bool first_choice = it->choice == 0;
    if (e.finished != runtime::FinishReason::kNone) live_.erase(it);
    if (first_choice) release_deferred(e.id);  // the prompt's pages are in the cache now
  }
}

void Scheduler::loop() {
  std::vector<Job> jobs;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !engine_->idle(); });
      if (stopping_) break;
      jobs.swap(incoming_);
      incoming_sequences_ = 0;
    }
    admit(jobs);
    {
      std::lock_guard lock(mu_);
      stats_ = engine_->stats();  // the queue bound sees the new arrivals
    }
    for (const Live& l : live_) {
      if (l.channel->cancelled(l.choice)) engine_->cancel(l.id);
    }
    auto events = engine_->step();
    if (!events) {  // a failed step ends every sequence in it: report and go on
      log_warning("engine step failed: " + events.message());
      for (const Live& l : live_) {
        engine_->cancel(l.id);
        l.channel->fail(events.status());
      }
      live_.clear();
      deferred_.clear();      // their channels failed with their first choices
      (void)engine_->step();  // collect the cancellations
      continue;
    }
    {
      // Before the events go out: a client told its request ended must not
      // then read it as running (/metrics).
      std::lock_guard lock(mu_);
      stats_ = engine_->stats();
    }
    deliver(*events);
  }
  for (const Live& l : live_) l.channel->fail(Status::unavailable("the server stopped"));
  for (const Deferred& d : deferred_) d.channel->fail(Status::unavailable("the server stopped"));
  std::lock_guard lock(mu_);
  for (Job& j : incoming_) j.channel->fail(Status::unavailable("the server stopped"));
  incoming_.clear();
}

}  // namespace minfer::serve
