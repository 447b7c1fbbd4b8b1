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

bool Channel::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void Channel::push(const Item& item) {
  {
    std::lock_guard lock(mu_);
    items_.push_back(item);
    if (item.finished != runtime::FinishReason::kNone) done_ = true;
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

Scheduler::Scheduler(std::unique_ptr<runtime::Engine> engine)
    : engine_(std::move(engine)), thread_([this] { loop(); }) {}

Scheduler::~Scheduler() {
  stop();
}

std::shared_ptr<Channel> Scheduler::submit(runtime::Request request) {
  auto ch = std::make_shared<Channel>();
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      ch->fail(Status::unavailable("the server is stopping"));
      return ch;
    }
    incoming_.push_back({std::move(request), ch});
  }
  cv_.notify_all();
  return ch;
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

void Scheduler::admit(std::vector<Job>& jobs) {
  for (Job& j : jobs) {
    auto id = engine_->add(std::move(j.request));
    if (!id) {
      j.channel->fail(id.status());
      continue;
    }
    live_.push_back({*id, j.channel});
  }
  jobs.clear();
}

void Scheduler::loop() {
  std::vector<Job> jobs;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !engine_->idle(); });
      if (stopping_) break;
      jobs.swap(incoming_);
    }
    admit(jobs);
    for (const Live& l : live_) {
      if (l.channel->cancelled()) engine_->cancel(l.id);
    }
    auto events = engine_->step();
    if (!events) {  // a failed step ends every sequence in it: report and go on
      log_warning("engine step failed: " + events.message());
      for (const Live& l : live_) {
        engine_->cancel(l.id);
        l.channel->fail(events.status());
      }
      live_.clear();
      (void)engine_->step();  // collect the cancellations
      continue;
    }
    for (const runtime::SequenceEvent& e : *events) {
      auto it =
          std::find_if(live_.begin(), live_.end(), [&](const Live& l) { return l.id == e.id; });
      if (it == live_.end()) continue;
      it->channel->push({e.has_token, e.token, e.finished, e.prompt_tokens});
      if (e.finished != runtime::FinishReason::kNone) live_.erase(it);
    }
    std::lock_guard lock(mu_);
    stats_ = engine_->stats();
  }
  for (const Live& l : live_) l.channel->fail(Status::unavailable("the server stopped"));
  std::lock_guard lock(mu_);
  for (Job& j : incoming_) j.channel->fail(Status::unavailable("the server stopped"));
  incoming_.clear();
}

}  // namespace minfer::serve
