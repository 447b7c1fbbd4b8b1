// CudaBackend: backend::Backend on one CUDA device (contract in
// backend/cuda/cuda_backend.h; the class in cuda_backend_impl.h). Kernels live
// in matmul.cu, ops.cu, fused.cu and attention.cu; the per-op runners in
// op_runners.cu; the device layer in device.cu; the uploaded weights in
// weights.cu. This file holds the op table, buffers, host copies, the bounded
// synchronize, and create_backend().
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/backend_options.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_options.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_support.h"
#include "backend/cuda/replay.h"
#include "backend/cuda/weights.h"
#include "backend/device_errors.h"
#include "backend/node_checks.h"

namespace minfer::cuda::detail {
namespace {

// One row of the op table: which nodes the CUDA backend runs, and how.
struct OpEntry {
  bool (*supports)(const Node&, const DeviceWeights&);
  Status (CudaBackend::*run)(const Call&);
};

// A check of the node alone (backend/node_checks.h) as a table entry.
template <bool (*Check)(const Node&)>
constexpr auto node_check = backend::node_only<Check, DeviceWeights>;
constexpr auto f32_out = node_check<backend::f32_output>;

const OpEntry& entry(Op op) {
  static const OpEntry kTable[] = {
      /* kInput        */ {node_check<backend::i32_input>, nullptr},
      /* kGetRows      */ {get_rows_ok, &CudaBackend::run_get_rows},
      /* kRmsNorm      */ {rms_norm_ok, &CudaBackend::run_rms_norm},
      /* kMatMul       */ {matmul_ok, &CudaBackend::run_matmul},
      /* kAdd          */ {f32_out, &CudaBackend::run_elementwise},
      /* kMul          */ {f32_out, &CudaBackend::run_elementwise},
      /* kScale        */ {f32_out, &CudaBackend::run_elementwise},
      /* kRope         */ {rope_ok, &CudaBackend::run_rope},
      /* kKvStore      */ {kv_store_ok, &CudaBackend::run_kv_store},
      /* kAttention    */ {attention_ok, &CudaBackend::run_attention},
      /* kSilu         */ {f32_out, &CudaBackend::run_elementwise},
      /* kGelu         */ {f32_out, &CudaBackend::run_elementwise},
      /* kSwiGLU       */ {f32_out, &CudaBackend::run_elementwise},
      /* kGeGLU        */ {f32_out, &CudaBackend::run_elementwise},
      /* kFusedQKV     */ {fused_qkv_ok, &CudaBackend::run_fused_qkv},
      /* kFusedQkvNorm */ {fused_qkv_ok, &CudaBackend::run_fused_qkv},
      /* kFusedFFN     */ {fused_ffn_ok, &CudaBackend::run_fused_ffn},
      /* kMatMulAdd    */ {matmul_add_ok, &CudaBackend::run_matmul},
      /* kArgMax       */ {node_check<backend::argmax_well_formed>, &CudaBackend::run_argmax},
      /* kMoeTopK      */ {moe_route_ok, &CudaBackend::run_moe_topk},
      /* kMoeWeights   */ {moe_route_ok, &CudaBackend::run_moe_weights},
      /* kMatMulId     */ {matmul_id_ok, &CudaBackend::run_matmul_id},
      /* kMoeSum       */ {node_check<backend::moe_sum_well_formed>, &CudaBackend::run_moe_sum},
      /* kSwiGLUOai    */ {node_check<backend::glu_pair_well_formed>, &CudaBackend::run_swiglu_oai},
      // Collectives: the CPU runs them until an NCCL communicator lands.
      /* kAllReduce    */ {[](const Node&, const DeviceWeights&) { return false; }, nullptr},
      /* kAllGather    */ {[](const Node&, const DeviceWeights&) { return false; }, nullptr},
  };
  static_assert(std::size(kTable) == static_cast<size_t>(Op::kCount));
  return kTable[static_cast<size_t>(op)];
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const DeviceWeights> weights, Stream stream, Event done,
                         DeviceBuffer err, uint32_t* err_host, const Options& options)
    : weights_(std::move(weights)),
      stream_(std::move(stream)),
      done_(std::move(done)),
      err_(std::move(err)),
      err_host_(err_host),
      timeout_s_(options.section<backend::GpuOptions>().gpu_timeout_s),
      recorder_(!options.section<CudaOptions>().no_cuda_graph),
      profiling_(options.op_profile),
      q8_gemv_(!options.section<CudaOptions>().gemv_f32),
      split_kv_(!options.section<CudaOptions>().no_split_kv) {}

CudaBackend::~CudaBackend() {
  (void)cudaStreamSynchronize(stream_.get());
  if (err_host_ != nullptr) (void)cudaFreeHost(err_host_);
}

// An input norm folds into FusedQKV / FusedFFN (kRmsNorm); every other
// fused op where the table runs it.
bool CudaBackend::supports_fused(Op fused) const {
  return fused == Op::kRmsNorm || (fused < Op::kCount && entry(fused).run != nullptr);
}

bool CudaBackend::supports_op(const Node& node) const {
  if (node.op >= Op::kCount) return false;
  // A matmul with its input norm folded in runs only where the activation
  // quantizer normalizes (the int8 tensor-core path).
  const auto* mm = std::get_if<graph::MatMulMeta>(&node.meta);
  if (mm != nullptr && mm->in_norm.on) {
    const DeviceWeight* w = weights_->find(mm->weight);
    if (w == nullptr || !use_mmq(w->type, w->row_len, node.shape.ne[1], mm->batch_invariant)) {
      return false;
    }
  }
  const auto* qkv = std::get_if<graph::FusedQkvMeta>(&node.meta);
  if (qkv != nullptr && !fused_qkv_path(*qkv, node.shape.ne[1])) return false;
  return entry(node.op).supports(node, *weights_);
}

bool CudaBackend::fused_qkv_path(const graph::FusedQkvMeta& m, int64_t n_tokens) const {
  if (n_tokens == 1 && !m.batch_invariant) return true;  // the one-token GEMV
  for (const std::string* name : {&m.q_weight, &m.k_weight, &m.v_weight}) {
    const DeviceWeight* w = weights_->find(*name);
    if (w == nullptr || !use_mmq(w->type, w->row_len, n_tokens, m.batch_invariant)) return false;
  }
  return true;
}

Result<BufferId> CudaBackend::alloc_buffer(size_t bytes) {
  auto buf = DeviceBuffer::allocate(bytes);
  if (!buf.is_ok()) return buf.status().with_context("CUDA");
  Slot s{std::move(buf).value(), true};
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].live) {
      slots_[i] = std::move(s);
      return static_cast<BufferId>(i);
    }
  }
  slots_.push_back(std::move(s));
  return static_cast<BufferId>(slots_.size() - 1);
}

void CudaBackend::free_buffer(BufferId id) {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return;
  recorder_.clear();  // recordings may hold this buffer's address
  slots_[static_cast<size_t>(id)] = Slot{};
}

size_t CudaBackend::buffer_size(BufferId id) const {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return 0;
  const Slot& s = slots_[static_cast<size_t>(id)];
  return s.live ? s.buf.size() : 0;
}

void* CudaBackend::ptr(BufferId id) const {
  if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return nullptr;
  const Slot& s = slots_[static_cast<size_t>(id)];
  return s.live ? s.buf.data() : nullptr;
}

Status CudaBackend::launched(const Node& n, const char* kernel, cudaError_t err) {
  trail_.record(std::string(kernel) + " '" + n.name + "'");
  ++pending_;
  if (recorder_.capturing()) recorder_.count_launch();
  if (err != cudaSuccess) {
    recorder_.discard(stream_.get());
    return node_error(n, std::string("launch of ") + kernel + " failed: " + cudaGetErrorName(err) +
                             " (" + cudaGetErrorString(err) + ")");
  }
  return Status::ok();
}

Status CudaBackend::synchronize() {
  if (pending_ == 0) return Status::ok();
  MINFER_CUDA_CHECK(cudaMemcpyAsync(err_host_, err_.data(), kErrWords * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, stream_.get()));
  MINFER_CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int spins = 0;; ++spins) {
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      return Status::internal(std::string("CUDA: device error while waiting: ") +
                              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + "); " +
                              recent_kernels());
    }
    if (Clock::now() > deadline) {
      return Status::unavailable("CUDA: the GPU did not finish within " +
                                 std::to_string(timeout_s_) + " s (MINFER_GPU_TIMEOUT); " +
                                 recent_kernels());
    }
    if (spins > 2000) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      std::this_thread::yield();
    }
  }
  pending_ = 0;
  if (err_host_[0] != MINFER_ERR_NONE) {
    Status reported = backend::device_error(err_host_, "CUDA", recent_kernels());
    MINFER_CUDA_CHECK(cudaMemsetAsync(err_.data(), 0, kErrWords * sizeof(uint32_t), stream_.get()));
    MINFER_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    err_host_[0] = MINFER_ERR_NONE;
    return reported;
  }
  return Status::ok();
}

Result<bool> CudaBackend::begin_split(uint64_t key) {
  ++events_;
  MINFER_ASSIGN_OR_RETURN(const bool replayed, recorder_.begin(key, stream_.get()));
  if (replayed) {
    // The trail keeps the recorded kernels' names from the capture; mark the replay.
    trail_.record("graph replay of split " + std::to_string(key & 0xffff) + " (" +
                  std::to_string(recorder_.launches_in(key)) + " kernels)");
    ++pending_;
  }
  return replayed;
}

Status CudaBackend::end_split() {
  ++events_;
  return recorder_.end(stream_.get());
}

Status CudaBackend::read_host(BufferId id, size_t offset, std::span<std::byte> dst) {
  void* p = ptr(id);
  if (p == nullptr || offset + dst.size() > buffer_size(id)) {
    return Status::internal("CUDA read_host: buffer " + std::to_string(id) + " range [" +
                            std::to_string(offset) + ", +" + std::to_string(dst.size()) +
                            ") out of bounds (size " + std::to_string(buffer_size(id)) + ")");
  }
  MINFER_CUDA_CHECK(cudaMemcpyAsync(dst.data(), static_cast<std::byte*>(p) + offset, dst.size(),
                                    cudaMemcpyDeviceToHost, stream_.get()));
  ++pending_;
  return synchronize();
}

Status CudaBackend::write_host(BufferId id, size_t offset, std::span<const std::byte> src) {
  void* p = ptr(id);
  if (p == nullptr || offset + src.size() > buffer_size(id)) {
    return Status::internal("CUDA write_host: buffer " + std::to_string(id) + " range [" +
                            std::to_string(offset) + ", +" + std::to_string(src.size()) +
                            ") out of bounds (size " + std::to_string(buffer_size(id)) + ")");
  }
  ++events_;
  // From pageable memory the copy is staged before the call returns, so the
  // caller may reuse `src` at once; stream order puts it before later kernels.
  MINFER_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(p) + offset, src.data(), src.size(),
                                    cudaMemcpyHostToDevice, stream_.get()));
  ++pending_;
  return Status::ok();
}

Result<float*> CudaBackend::scratch(const Node& n, size_t bytes) {
  if (scratch_.size() < bytes) {
    quantized_.valid = false;
    scratch_.reset();   // cudaFree waits for the device, so no kernel still uses it
    recorder_.clear();  // recordings may hold the old address
    auto b = DeviceBuffer::allocate(bytes);
    if (!b.is_ok()) return node_error(n, "scratch: " + b.message());
    scratch_ = std::move(b).value();
  }
  return static_cast<float*>(scratch_.data());
}

Result<const int32_t*> CudaBackend::row_list(const std::vector<int32_t>& rows) {
  auto it = row_lists_.find(rows);
  if (it == row_lists_.end()) {
    MINFER_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(rows.size() * sizeof(int32_t)));
    MINFER_CUDA_CHECK(
        cudaMemcpy(b.data(), rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    it = row_lists_.emplace(rows, std::move(b)).first;
  }
  return static_cast<const int32_t*>(it->second.data());
}

Status CudaBackend::execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                                 const KvPair* kv) {
  ++events_;
  if (node.op >= Op::kCount || entry(node.op).run == nullptr || !supports_op(node)) {
    return node_error(node, "not supported by the CUDA backend");
  }
  Call call{node, {}, inputs.size(), nullptr, nullptr, nullptr, kv};
  if (inputs.size() > call.in.size()) return node_error(node, "too many inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == backend::kNoBuffer) continue;  // an input with no value (KV store)
    call.in[i] = ptr(inputs[i]);
    if (call.in[i] == nullptr) {
      return node_error(node, "input " + std::to_string(i) + " has no buffer");
    }
  }
  if (node.bytes() > 0) {
    call.out = ptr(out);
    if (call.out == nullptr || buffer_size(out) < node.bytes()) {
      return node_error(node, "output buffer missing or too small");
    }
  }
  if (kv != nullptr) {
    call.k_cache = ptr(kv->k);
    call.v_cache = ptr(kv->v);
  }
  Event* stop = nullptr;
  if (profiling_) {  // a pair of timing events around the node's kernels
    if (n_timed_ == node_events_.size()) {
      MINFER_ASSIGN_OR_RETURN(Event start, Event::create_timed());
      MINFER_ASSIGN_OR_RETURN(Event end, Event::create_timed());
      node_events_.emplace_back(std::move(start), std::move(end));
    }
    auto& [start, end] = node_events_[n_timed_++];
    MINFER_CUDA_CHECK(cudaEventRecord(start.get(), stream_.get()));
    stop = &end;
  }
  Status st = (this->*entry(node.op).run)(call);
  if (!st) {
    recorder_.discard(stream_.get());
    return st;
  }
  if (stop != nullptr) MINFER_CUDA_CHECK(cudaEventRecord(stop->get(), stream_.get()));
  return st;
}

std::vector<double> CudaBackend::take_node_times() {
  std::vector<double> out;
  for (size_t i = 0; i < n_timed_; ++i) {
    float ms = 0.0f;
    const auto& [start, end] = node_events_[i];
    out.push_back(cudaEventElapsedTime(&ms, start.get(), end.get()) == cudaSuccess ? ms * 1e-3
                                                                                   : 0.0);
  }
  n_timed_ = 0;
  return out;
}

}  // namespace minfer::cuda::detail

namespace minfer::cuda {

bool available() {
  return Device::get() != nullptr;
}

std::string unavailable_reason() {
  return available() ? "" : Device::unavailable_reason();
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights,
                                                         const Options& options) {
  if (!available()) return Status::unavailable(unavailable_reason());
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceWeights> dw, DeviceWeights::get(weights));
  MINFER_ASSIGN_OR_RETURN(Stream stream, Stream::create());
  MINFER_ASSIGN_OR_RETURN(Event done, Event::create());
  MINFER_ASSIGN_OR_RETURN(DeviceBuffer err, DeviceBuffer::allocate(kErrWords * sizeof(uint32_t)));
  MINFER_CUDA_CHECK(cudaMemset(err.data(), 0, kErrWords * sizeof(uint32_t)));
  uint32_t* err_host = nullptr;
  MINFER_CUDA_CHECK(cudaMallocHost(&err_host, kErrWords * sizeof(uint32_t)));
  std::memset(err_host, 0, kErrWords * sizeof(uint32_t));
  return std::unique_ptr<backend::Backend>(new detail::CudaBackend(
      std::move(dw), std::move(stream), std::move(done), std::move(err), err_host, options));
}

}  // namespace minfer::cuda
