// SplitRecorder: CUDA graph capture and replay of one split's launches.
//
// A decode step runs the same kernels with the same arguments every time:
// tokens and positions are read from device buffers, the KV length from the
// positions, and the plan's buffers stay put while its GraphParams hold. So
// the backend records a split's launches once (stream capture into a CUDA
// graph) and replays the recording with one cudaGraphLaunch afterwards.
//
// Contract:
//   - begin(key) before a split's nodes: returns true when a recording of
//     `key` exists; it has been launched on the stream and the caller must not
//     enqueue the nodes again. Otherwise the caller enqueues the nodes and
//     calls end(). The first execution of a key runs uncaptured (it may
//     allocate scratch memory or upload row lists, which capture forbids);
//     the second is captured, instantiated and launched in end(); from the
//     third on it is replayed.
//   - discard() ends a capture in progress without keeping it (a node failed);
//     that key is never captured again.
//   - clear() drops every recording. The owner calls it whenever a device
//     pointer a recording may hold changes (a buffer freed, scratch
//     reallocated).
//   - Disabled (MINFER_NO_CUDA_GRAPH=1, or enabled=false): begin() always
//     returns false and nothing is captured.
//   - Capture uses cudaStreamCaptureModeThreadLocal: only this thread's
//     unsafe calls would break it.
// Ownership: owns the instantiated graphs (released in clear() and the
// destructor). Not thread-safe; one driving thread, as the backend.
// Include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "base/status.h"

namespace minfer::cuda {

class SplitRecorder {
 public:
  explicit SplitRecorder(bool enabled) : enabled_(enabled) {}
  ~SplitRecorder() { clear(); }
  SplitRecorder(const SplitRecorder&) = delete;
  SplitRecorder& operator=(const SplitRecorder&) = delete;

  [[nodiscard]] Result<bool> begin(uint64_t key, cudaStream_t stream);
  [[nodiscard]] Status end(cudaStream_t stream);
  void discard(cudaStream_t stream);
  void clear();

  bool capturing() const { return capturing_; }
  // Launches of the split being captured (counted by the owner) and, after a
  // replay, the number the replayed recording holds.
  void count_launch() { ++launches_; }
  size_t launches_in(uint64_t key) const;
  uint64_t replays() const { return replays_; }

 private:
  struct Recording {
    int executions = 0;
    bool capturable = true;
    cudaGraphExec_t exec = nullptr;
    size_t launches = 0;
  };
  bool enabled_;
  bool capturing_ = false;
  uint64_t key_ = 0;
  size_t launches_ = 0;
  uint64_t replays_ = 0;
  std::unordered_map<uint64_t, Recording> recordings_;
};

}  // namespace minfer::cuda
