// The recorder: the shared, API-independent part of encoding GPU work. A
// backend records every dispatch of a split through one Recorder, which
// validates it, orders it after what it depends on, notes it in the kernel
// trail and encodes it into one CommandList of the device; submit_and_wait()
// submits that list once and waits with a deadline (docs/ARCHITECTURE.md, "Contracts" 4 and 5).
//
// Contract:
//   - dispatch() checks the call against the kernel table and the device's
//     limits (limits.h: errors with the actual numbers) before anything is
//     encoded. It inserts a barrier before a dispatch that reads or writes a
//     byte range written since the last barrier, or writes one read since
//     then; ranges are compared by overlap (a binding of size 0 reaches the
//     end of its buffer), so dispatches on disjoint sub-ranges of one buffer
//     (pool allocations in one chunk) are not separated, nor are independent
//     dispatches. The barrier itself covers the whole buffers involved. `note` (a node's name, say)
//     goes into the trail beside the kernel's label.
//   - submit_and_wait() submits everything recorded since the last call as
//     one submission and waits at most timeout_s (device.timeout_s() unless
//     the constructor was given one) seconds; with
//     nothing recorded it returns at once. On timeout the error is
//     unavailable and names the deadline, MINFER_GPU_TIMEOUT and the last 16
//     kernels; the work keeps running on the device, which frees its
//     resources when it ends. Any error (encode, submit, wait) drops the
//     recording: what was recorded and not yet submitted is lost.
//   - The caller keeps every bound buffer alive until submit_and_wait()
//     returns, and does not write or read them from the host in between.
// Threading: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/kernel_trail.h"
#include "backend/shader/device.h"
#include "backend/shader/kernel_table.h"
#include "base/status.h"

namespace minfer::shader {

class Recorder {
 public:
  explicit Recorder(Device& device) : Recorder(device, device.timeout_s()) {}
  // timeout_s: the deadline of each wait, where it is not the device's (a
  // backend's own GpuOptions::gpu_timeout_s: a device shared by several
  // backends keeps the options it was opened with).
  Recorder(Device& device, double timeout_s) : device_(device), timeout_s_(timeout_s) {}

  Status dispatch(uint32_t kernel, std::span<const BufferRange> bindings,
                  std::span<const std::byte> push, Groups groups, std::string_view note = {});
  // The same with a kernel_args.h struct as the push constants.
  template <typename Args>
  Status dispatch_args(uint32_t kernel, std::span<const BufferRange> bindings, const Args& args,
                       Groups groups, std::string_view note = {}) {
    return dispatch(kernel, bindings, std::as_bytes(std::span(&args, 1)), groups, note);
  }

  Status submit_and_wait();

  // Profiling: a timestamp once everything recorded so far has finished (on
  // devices with timestamps; a list is begun if none is). After a
  // submit_and_wait() that succeeded, timestamps_s() holds that submission's
  // timestamps in seconds, in order (empty when it took none).
  Status timestamp();
  const std::vector<double>& timestamps_s() const { return times_s_; }
  // Whether anything (a dispatch, a timestamp, a replay) waits for submit_and_wait().
  bool recording() const { return list_ != nullptr || replaying_ != nullptr; }

  // Split replay (devices whose lists are reusable()). keep_next() makes the
  // next successful submit_and_wait() keep its list for take_kept() instead
  // of dropping it, with the trail of what it recorded. replay() resubmits
  // such a list (nothing else may be recorded since the last wait); the next
  // submit_and_wait() waits for it with the deadline, its error naming the
  // replayed kernels. A list whose replay failed must be dropped.
  struct Kept {
    std::unique_ptr<CommandList> list;
    std::string trail;
  };
  void keep_next() { keep_ = true; }
  Kept take_kept() { return std::move(kept_); }
  Status replay(CommandList& list, const std::string& trail);

  Device& device() const { return device_; }
  size_t pending() const { return pending_; }      // dispatches not yet submitted
  uint64_t barriers() const { return barriers_; }  // barriers inserted so far
  const backend::KernelTrail& trail() const { return trail_; }

  // Bytes [begin, end) of a buffer that a recorded dispatch reads or writes.
  struct Touched {
    const Buffer* buffer;
    uint64_t begin, end;
  };

 private:
  void reset();  // drops the list (a running one goes to the device) and the hazard sets
  Status fail(Status s);
  // Waits for a submitted list with the deadline; errors name `trail`.
  Status wait_for(CommandList& list, const std::string& trail);
  // The buffers of `bindings` that the new dispatch must wait for.
  std::vector<const Buffer*> hazards(const KernelInfo& kernel,
                                     std::span<const BufferRange> bindings) const;

  Device& device_;
  double timeout_s_;
  std::unique_ptr<CommandList> list_;
  size_t pending_ = 0;
  uint64_t barriers_ = 0;
  std::vector<Touched> written_, read_;  // since the last barrier
  backend::KernelTrail trail_;
  size_t n_timestamps_ = 0;  // in the current list
  bool keep_ = false;
  Kept kept_;
  CommandList* replaying_ = nullptr;
  std::string replay_trail_;
  std::vector<double> times_s_;
};

}  // namespace minfer::shader
