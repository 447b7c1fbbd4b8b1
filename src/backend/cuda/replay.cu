// SplitRecorder (contract in replay.h).
#include "backend/cuda/device.h"
#include "backend/cuda/replay.h"

namespace minfer::cuda {

Result<bool> SplitRecorder::begin(uint64_t key, cudaStream_t stream) {
  if (!enabled_) return false;
  Recording& r = recordings_[key];
  if (r.exec != nullptr) {
    MINFER_CUDA_CHECK(cudaGraphLaunch(r.exec, stream));
    ++replays_;
    return true;
  }
  if (r.capturable && r.executions++ == 1) {
    MINFER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    key_ = key;
    launches_ = 0;
  }
  return false;
}

Status SplitRecorder::end(cudaStream_t stream) {
  if (!capturing_) return Status::ok();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  MINFER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  Recording& r = recordings_[key_];
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    r.capturable = false;
    return cuda_error(inst, "cudaGraphInstantiate(split recording)", __FILE__, __LINE__);
  }
  r.exec = exec;
  r.launches = launches_;
  MINFER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return Status::ok();
}

void SplitRecorder::discard(cudaStream_t stream) {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) {
    (void)cudaGraphDestroy(graph);
  }
  (void)cudaGetLastError();  // a broken capture leaves a sticky-free error behind
  recordings_[key_].capturable = false;
}

void SplitRecorder::clear() {
  for (auto& [key, r] : recordings_) {
    if (r.exec != nullptr) (void)cudaGraphExecDestroy(r.exec);
  }
  recordings_.clear();
}

size_t SplitRecorder::launches_in(uint64_t key) const {
  auto it = recordings_.find(key);
  return it == recordings_.end() ? 0 : it->second.launches;
}

}  // namespace minfer::cuda
