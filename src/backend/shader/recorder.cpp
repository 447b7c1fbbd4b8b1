#include "backend/shader/recorder.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/shader/kernel_table.h"
#include "backend/shader/limits.h"

namespace minfer::shader {
namespace {

// The bytes [begin, end) of a buffer that a binding touches (size 0: to the
// end of the buffer's capacity).
Recorder::Touched touched(const BufferRange& r) {
  const uint64_t end = r.size != 0 ? r.offset + r.size : std::max(r.buffer->capacity(), r.offset);
  return {r.buffer, r.offset, end};
}

bool overlaps(const std::vector<Recorder::Touched>& v, const Recorder::Touched& t) {
  return std::any_of(v.begin(), v.end(), [&](const Recorder::Touched& u) {
    return u.buffer == t.buffer && u.begin < t.end && t.begin < u.end;
  });
}

void add_unique(std::vector<const Buffer*>& v, const Buffer* b) {
  if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
}

}  // namespace

void Recorder::reset() {
  list_.reset();
  keep_ = false;
  replaying_ = nullptr;
  n_timestamps_ = 0;
  pending_ = 0;
  written_.clear();
  read_.clear();
}

Status Recorder::fail(Status s) {
  reset();
  return s;
}

std::vector<const Buffer*> Recorder::hazards(const KernelInfo& kernel,
                                             std::span<const BufferRange> bindings) const {
  std::vector<const Buffer*> out;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (kernel.bindings[i].access == Access::kAtomic) continue;
    const Touched t = touched(bindings[i]);
    const bool after_write = overlaps(written_, t);
    const bool write_after_read = kernel.bindings[i].writes() && overlaps(read_, t);
    if (after_write || write_after_read) add_unique(out, t.buffer);
  }
  return out;
}

Status Recorder::dispatch(uint32_t kernel, std::span<const BufferRange> bindings,
                          std::span<const std::byte> push, Groups groups, std::string_view note) {
  const std::span<const KernelInfo> table = embedded_kernels();
  if (kernel >= table.size()) {
    return Status::internal("kernel index " + std::to_string(kernel) + " past the table of " +
                            std::to_string(table.size()));
  }
  const KernelInfo& info = table[kernel];
  MINFER_RETURN_IF_ERROR(check_dispatch(device_.info().limits, info, device_.kernel(kernel),
                                        bindings, push.size(), groups));
  if (!list_) {
    auto list = device_.begin_commands();
    if (!list.is_ok()) return fail(list.status());
    list_ = std::move(list).value();
  }
  const std::vector<const Buffer*> wait_for = hazards(info, bindings);
  if (!wait_for.empty()) {
    Status s = list_->barrier(wait_for);
    if (!s.is_ok()) return fail(s.with_context("barrier before " + info.label()));
    ++barriers_;
    written_.clear();
    read_.clear();
  }
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (info.bindings[i].access == Access::kAtomic) continue;
    (info.bindings[i].writes() ? written_ : read_).push_back(touched(bindings[i]));
  }
  trail_.record(note.empty() ? info.label() : info.label() + " '" + std::string(note) + "'");
  Status s = list_->dispatch(kernel, bindings, push, groups);
  if (!s.is_ok()) return fail(s.with_context("dispatch of " + info.label()));
  ++pending_;
  return Status::ok();
}

Status Recorder::replay(CommandList& list, const std::string& trail) {
  if (list_ || replaying_ != nullptr) {
    return Status::internal("replay while other work is recorded or running");
  }
  Status s = list.resubmit();
  if (!s.is_ok()) return s.with_context("replay; " + trail);
  replaying_ = &list;
  replay_trail_ = trail;
  return Status::ok();
}

Status Recorder::wait_for(CommandList& list, const std::string& trail) {
  const double timeout_s = timeout_s_;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  Result<bool> done = list.wait(deadline);
  if (!done.is_ok()) return fail(done.status().with_context("wait; " + trail));
  if (!*done) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
    return fail(Status::unavailable(device_.info().name + ": the GPU did not finish within " +
                                    seconds + " s (MINFER_GPU_TIMEOUT); " + trail));
  }
  return Status::ok();
}

Status Recorder::submit_and_wait() {
  if (replaying_ != nullptr) {
    times_s_.clear();
    const std::string trail = "replayed split, " + replay_trail_;
    MINFER_RETURN_IF_ERROR(wait_for(*replaying_, trail));
    replaying_ = nullptr;
    return Status::ok();
  }
  if (!list_) return Status::ok();
  Status s = list_->submit();
  if (!s.is_ok()) return fail(s.with_context("submit; " + trail_.describe()));
  MINFER_RETURN_IF_ERROR(wait_for(*list_, trail_.describe()));
  times_s_.clear();
  if (n_timestamps_ > 0) {
    Result<std::vector<uint64_t>> ticks = list_->timestamps();
    if (!ticks.is_ok()) return fail(ticks.status().with_context("timestamps"));
    const double period_s = device_.info().timestamp_period_ns * 1e-9;
    for (uint64_t t : *ticks) times_s_.push_back(double(t) * period_s);
  }
  if (keep_ && list_->reusable() && n_timestamps_ == 0)
    kept_ = {std::move(list_), trail_.describe()};
  reset();
  return Status::ok();
}

Status Recorder::timestamp() {
  if (!list_) {
    auto list = device_.begin_commands();
    if (!list.is_ok()) return fail(list.status());
    list_ = std::move(list).value();
  }
  Status s = list_->write_timestamp();
  if (!s.is_ok()) return fail(s);
  ++n_timestamps_;
  return Status::ok();
}

}  // namespace minfer::shader
