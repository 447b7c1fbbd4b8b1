// CudaBackend: backend::Backend on one CUDA device (contract in
// backend/cuda/cuda_backend.h). Kernels live in matmul.cu, ops.cu and
// attention.cu; the device layer in device.cu; the uploaded weights in
// weights.cu. This file holds the op table, buffers, host copies and the
// bounded synchronize.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_support.h"
#include "backend/cuda/replay.h"
#include "backend/cuda/weights.h"

namespace minfer::cuda {
namespace {

using backend::BufferId;
using backend::KvPair;
using graph::DType;
using graph::Node;
using graph::Op;

Status fail(const Node& n, const std::string& what) {
  return Status::error("node '" + n.name + "' (" + graph::op_name(n.op) + "): " + what);
}

template <typename M>
Result<const M*> meta(const Node& n) {
  const M* m = std::get_if<M>(&n.meta);
  if (m == nullptr) return fail(n, "missing metadata");
  return m;
}

double timeout_seconds() {
  if (const char* env = std::getenv("MINFER_GPU_TIMEOUT"); env != nullptr && *env) {
    const double v = std::atof(env);
    if (v > 0) return v;
  }
  return 10.0;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

class CudaBackend;

// What one op's kernel gets: device pointers of the inputs (null for an input
// without a value), of the output and of the layer's KV regions.
struct Call {
  const Node& node;
  std::array<void*, 6> in;
  size_t n_in;
  void* out;
  void* k_cache;
  void* v_cache;
  const KvPair* kv;
  const float* f32_in(size_t i) const { return static_cast<const float*>(in[i]); }
  const int32_t* i32_in(size_t i) const { return static_cast<const int32_t*>(in[i]); }
  float* f32_out() const { return static_cast<float*>(out); }
};

class CudaBackend final : public backend::Backend {
 public:
  CudaBackend(std::shared_ptr<const DeviceWeights> weights, Stream stream, Event done,
              DeviceBuffer err, int* err_host)
      : weights_(std::move(weights)),
        stream_(std::move(stream)),
        done_(std::move(done)),
        err_(std::move(err)),
        err_host_(err_host),
        timeout_s_(timeout_seconds()),
        recorder_(!env_on("MINFER_NO_CUDA_GRAPH")),
        profiling_(env_on("MINFER_OP_PROFILE")),
        q8_gemv_(!env_on("MINFER_GEMV_F32")) {}
  ~CudaBackend() override {
    (void)cudaStreamSynchronize(stream_.get());
    if (err_host_ != nullptr) (void)cudaFreeHost(err_host_);
  }

  std::string_view name() const override { return "CUDA"; }
  bool supports_op(const Node& node) const override;
  bool supports_fused(Op fused) const override {
    return fused == Op::kSwiGLU || fused == Op::kGeGLU || fused == Op::kFusedQKV ||
           fused == Op::kFusedQkvNorm || fused == Op::kFusedFFN || fused == Op::kMatMulAdd ||
           fused == Op::kRmsNorm;  // an input norm folded into FusedQKV/FusedFFN
  }
  bool has_weight(std::string_view name) const override { return weights_->find(name) != nullptr; }

  Result<BufferId> alloc_buffer(size_t bytes) override;
  void free_buffer(BufferId id) override;
  size_t buffer_size(BufferId id) const override;
  Status execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                      const KvPair* kv) override;
  Status read_host(BufferId id, size_t offset, std::span<std::byte> dst) override;
  Status write_host(BufferId id, size_t offset, std::span<const std::byte> src) override;
  Status synchronize() override;
  Result<bool> begin_split(uint64_t key) override;
  Status end_split() override;
  bool times_nodes() const override { return profiling_; }
  std::vector<double> take_node_times() override;

  // Op kernels, reached through the op table.
  Status run_matmul(const Call& c);
  Status run_get_rows(const Call& c);
  Status run_rms_norm(const Call& c);
  Status run_rope(const Call& c);
  Status run_kv_store(const Call& c);
  Status run_attention(const Call& c);
  Status run_elementwise(const Call& c);
  Status run_fused_qkv(const Call& c);
  Status run_fused_ffn(const Call& c);

 private:
  struct Slot {
    DeviceBuffer buf;
    bool live = false;
  };
  void* ptr(BufferId id) const;
  // Records a launch in the ring and turns its status into a Status.
  Status launched(const Node& n, const char* kernel, cudaError_t err);
  void note_in_ring(const std::string& what);
  std::string recent_kernels() const;
  // Device memory of at least `bytes` for outputs that alias an input.
  Result<float*> scratch(const Node& n, size_t bytes);
  // Device copy of an activation gather's row list (cached by content).
  Result<const int32_t*> row_list(const std::vector<int32_t>& rows);
  // Input 0 of a node with an InputNorm, for a kernel that does not normalize
  // itself: the rows normalized into scratch (or input 0 as is when off).
  Result<const float*> normalized_input(const Call& c, const graph::InputNorm& norm, int64_t dim);
  // The int8 GEMV's input for input 0 (one token) with the node's InputNorm.
  Q8Input q8_input(const Call& c, const graph::InputNorm& norm, int64_t dim) const;
  // Whether a GEMV over `type` rows of in_dim for n_tokens takes the int8 path.
  bool use_q8(quant::TensorType type, int64_t in_dim, int64_t n_tokens) const {
    return n_tokens == 1 && q8_gemv_ && has_q8_gemv(type, in_dim);
  }
  // The norm's f32 weight on the device, or null (no weight, or norm off).
  const float* norm_weight(const graph::InputNorm& norm) const {
    if (!norm.on || norm.weight.empty()) return nullptr;
    return reinterpret_cast<const float*>(weights_->find(norm.weight)->data);
  }

  std::shared_ptr<const DeviceWeights> weights_;
  Stream stream_;
  Event done_;
  DeviceBuffer err_;  // kErrWords ints on the device
  int* err_host_;     // pinned mirror, filled at every synchronize
  double timeout_s_;
  std::vector<Slot> slots_;
  DeviceBuffer scratch_;
  std::map<std::vector<int32_t>, DeviceBuffer> row_lists_;
  std::array<std::array<char, 112>, 16> ring_{};
  size_t ring_next_ = 0, ring_count_ = 0;
  size_t pending_ = 0;  // launches since the last synchronize
  SplitRecorder recorder_;
  // MINFER_OP_PROFILE: timing events around each node (a pool grown on use).
  bool profiling_;
  bool q8_gemv_;  // one-token GEMVs on int8 activations (off: MINFER_GEMV_F32=1)
  std::vector<std::pair<Event, Event>> node_events_;
  size_t n_timed_ = 0;
};

// One row of the op table: which nodes the CUDA backend runs, and how.
struct OpEntry {
  bool (*supports)(const Node&, const DeviceWeights&);
  Status (CudaBackend::*run)(const Call&);
};

Status cache_types_status(const Node& n, const KvPair& kv, int64_t head_dim) {
  if (cache_types_ok(kv.k_type, kv.v_type, head_dim)) return Status::ok();
  return fail(n, cache_types_problem(kv.k_type, kv.v_type, head_dim));
}

const OpEntry& entry(Op op) {
  static const OpEntry kTable[] = {
      /* kInput        */ {input_node, nullptr},
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
  };
  static_assert(std::size(kTable) == static_cast<size_t>(Op::kCount));
  return kTable[static_cast<size_t>(op)];
}

bool CudaBackend::supports_op(const Node& node) const {
  if (node.op >= Op::kCount) return false;
  return entry(node.op).supports(node, *weights_);
}

Result<BufferId> CudaBackend::alloc_buffer(size_t bytes) {
  auto buf = DeviceBuffer::allocate(bytes);
  if (!buf.is_ok()) return Status::error("CUDA: " + buf.message());
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

void CudaBackend::note_in_ring(const std::string& what) {
  std::snprintf(ring_[ring_next_].data(), ring_[ring_next_].size(), "%s", what.c_str());
  ring_next_ = (ring_next_ + 1) % ring_.size();
  ring_count_ = std::min(ring_count_ + 1, ring_.size());
}

Status CudaBackend::launched(const Node& n, const char* kernel, cudaError_t err) {
  note_in_ring(std::string(kernel) + " '" + n.name + "'");
  ++pending_;
  if (recorder_.capturing()) recorder_.count_launch();
  if (err != cudaSuccess) {
    recorder_.discard(stream_.get());
    return fail(n, std::string("launch of ") + kernel + " failed: " + cudaGetErrorName(err) + " (" +
                       cudaGetErrorString(err) + ")");
  }
  return Status::ok();
}

std::string CudaBackend::recent_kernels() const {
  std::string out = "last " + std::to_string(ring_count_) + " kernels (oldest first):";
  for (size_t i = 0; i < ring_count_; ++i) {
    const size_t idx = (ring_next_ + ring_.size() - ring_count_ + i) % ring_.size();
    out += "\n  ";
    out += ring_[idx].data();
  }
  return out;
}

Status CudaBackend::synchronize() {
  if (pending_ == 0) return Status::ok();
  MINFER_CUDA_CHECK(cudaMemcpyAsync(err_host_, err_.data(), kErrWords * sizeof(int),
                                    cudaMemcpyDeviceToHost, stream_.get()));
  MINFER_CUDA_CHECK(cudaEventRecord(done_.get(), stream_.get()));
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (int spins = 0;; ++spins) {
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      return Status::error(std::string("CUDA: device error while waiting: ") + cudaGetErrorName(e) +
                           " (" + cudaGetErrorString(e) + "); " + recent_kernels());
    }
    if (Clock::now() > deadline) {
      return Status::error("CUDA: the GPU did not finish within " + std::to_string(timeout_s_) +
                           " s (MINFER_GPU_TIMEOUT); " + recent_kernels());
    }
    if (spins > 2000) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else {
      std::this_thread::yield();
    }
  }
  pending_ = 0;
  if (err_host_[0] != kErrNone) {
    const int code = err_host_[0], a = err_host_[1], b = err_host_[2];
    MINFER_CUDA_CHECK(cudaMemsetAsync(err_.data(), 0, kErrWords * sizeof(int), stream_.get()));
    MINFER_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    err_host_[0] = kErrNone;
    if (code == kErrTokenRange) {
      return Status::error("CUDA: token id " + std::to_string(a) + " outside [0, " +
                           std::to_string(b) + "); " + recent_kernels());
    }
    if (code == kErrNonFiniteKv) {
      return Status::error("CUDA: a non-finite value was stored into the q8_0 KV cache row " +
                           std::to_string(a) + "; " + recent_kernels());
    }
    return Status::error("CUDA: position " + std::to_string(a) + " outside the KV cache of " +
                         std::to_string(b) + " rows; " + recent_kernels());
  }
  return Status::ok();
}

Result<bool> CudaBackend::begin_split(uint64_t key) {
  MINFER_ASSIGN_OR_RETURN(const bool replayed, recorder_.begin(key, stream_.get()));
  if (replayed) {
    // The ring keeps the recorded kernels' names from the capture; mark the replay.
    note_in_ring("graph replay of split " + std::to_string(key & 0xffff) + " (" +
                 std::to_string(recorder_.launches_in(key)) + " kernels)");
    ++pending_;
  }
  return replayed;
}

Status CudaBackend::end_split() {
  return recorder_.end(stream_.get());
}

Status CudaBackend::read_host(BufferId id, size_t offset, std::span<std::byte> dst) {
  void* p = ptr(id);
  if (p == nullptr || offset + dst.size() > buffer_size(id)) {
    return Status::error("CUDA read_host: buffer " + std::to_string(id) + " range [" +
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
    return Status::error("CUDA write_host: buffer " + std::to_string(id) + " range [" +
                         std::to_string(offset) + ", +" + std::to_string(src.size()) +
                         ") out of bounds (size " + std::to_string(buffer_size(id)) + ")");
  }
  // From pageable memory the copy is staged before the call returns, so the
  // caller may reuse `src` at once; stream order puts it before later kernels.
  MINFER_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(p) + offset, src.data(), src.size(),
                                    cudaMemcpyHostToDevice, stream_.get()));
  ++pending_;
  return Status::ok();
}

Result<float*> CudaBackend::scratch(const Node& n, size_t bytes) {
  if (scratch_.size() < bytes) {
    scratch_.reset();   // cudaFree waits for the device, so no kernel still uses it
    recorder_.clear();  // recordings may hold the old address
    auto b = DeviceBuffer::allocate(bytes);
    if (!b.is_ok()) return fail(n, "scratch: " + b.message());
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
  if (node.op >= Op::kCount || entry(node.op).run == nullptr || !supports_op(node)) {
    return fail(node, "not supported by the CUDA backend");
  }
  Call call{node, {}, inputs.size(), nullptr, nullptr, nullptr, kv};
  if (inputs.size() > call.in.size()) return fail(node, "too many inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == backend::kNoBuffer) continue;  // an input with no value (KV store)
    call.in[i] = ptr(inputs[i]);
    if (call.in[i] == nullptr) {
      return fail(node, "input " + std::to_string(i) + " has no buffer");
    }
  }
  if (node.bytes() > 0) {
    call.out = ptr(out);
    if (call.out == nullptr || buffer_size(out) < node.bytes()) {
      return fail(node, "output buffer missing or too small");
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

Status CudaBackend::run_matmul(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::MatMulMeta* m, meta<graph::MatMulMeta>(c.node));
  const DeviceWeight* w = weights_->find(m->weight);
  if (w == nullptr) return fail(c.node, "weight '" + m->weight + "' not on the GPU");
  if (w->row_len != m->in_dim || w->rows != m->out_dim || c.node.shape.ne[0] != m->out_dim) {
    return fail(c.node, "weight '" + m->weight + "' is [" + std::to_string(w->rows) + " x " +
                            std::to_string(w->row_len) + "], the node wants [" +
                            std::to_string(m->out_dim) + " x " + std::to_string(m->in_dim) + "]");
  }
  if (m->in_dim % 32 != 0) {
    return fail(c.node, "input dim " + std::to_string(m->in_dim) + " is not a multiple of 32");
  }
  const float* bias = nullptr;
  if (!m->bias.empty()) {
    const DeviceWeight* b = weights_->find(m->bias);
    if (b == nullptr) return fail(c.node, "bias '" + m->bias + "' not on the GPU");
    bias = reinterpret_cast<const float*>(b->data);
  }
  const int64_t n_tokens = c.node.shape.ne[1];
  float* y = c.f32_out();
  const bool aliased = c.out == c.in[0];
  if (aliased) {
    MINFER_ASSIGN_OR_RETURN(y, scratch(c.node, c.node.bytes()));
  }
  const bool add = c.node.op == Op::kMatMulAdd;
  if (add && (c.n_in != 2 || c.in[1] == nullptr || n_tokens > 4)) {
    return fail(c.node, "mul_mat_add takes (x, residual) for at most 4 tokens");
  }
  if (use_q8(w->type, w->row_len, n_tokens)) {
    MINFER_RETURN_IF_ERROR(launched(
        c.node, "gemv_q8",
        launch_gemv_q8(w->type, w->data, w->row_bytes, w->rows, q8_input(c, {}, w->row_len), bias,
                       add ? c.f32_in(1) : nullptr, y, stream_.get())));
  } else if (add) {  // the residual add in the GEMV's epilogue
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "gemv_add",
                 launch_gemv_add(w->type, w->data, w->row_bytes, w->rows, w->row_len, c.f32_in(0),
                                 n_tokens, bias, c.f32_in(1), y, stream_.get())));
  } else {
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "matmul",
                 launch_matmul(w->type, w->data, w->row_bytes, w->rows, w->row_len, c.f32_in(0),
                               n_tokens, bias, y, stream_.get())));
  }
  if (aliased) {
    MINFER_CUDA_CHECK(
        cudaMemcpyAsync(c.out, y, c.node.bytes(), cudaMemcpyDeviceToDevice, stream_.get()));
  }
  return Status::ok();
}

Status CudaBackend::run_get_rows(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::GetRowsMeta* m, meta<graph::GetRowsMeta>(c.node));
  const int64_t width = c.node.shape.ne[0], n_rows = c.node.shape.ne[1];
  if (m->weight.empty()) {  // rows of an activation
    if (static_cast<int64_t>(m->rows.size()) != n_rows) {
      return fail(c.node, std::to_string(m->rows.size()) + " row indices for " +
                              std::to_string(n_rows) + " output rows");
    }
    MINFER_ASSIGN_OR_RETURN(const int32_t* rows, row_list(m->rows));
    float* y = c.f32_out();
    const bool aliased = c.out == c.in[0];
    if (aliased) {
      MINFER_ASSIGN_OR_RETURN(y, scratch(c.node, c.node.bytes()));
    }
    MINFER_RETURN_IF_ERROR(
        launched(c.node, "gather_rows",
                 launch_gather_rows(c.f32_in(0), rows, n_rows, width, y, stream_.get())));
    if (aliased) {
      MINFER_CUDA_CHECK(
          cudaMemcpyAsync(c.out, y, c.node.bytes(), cudaMemcpyDeviceToDevice, stream_.get()));
    }
    return Status::ok();
  }
  const DeviceWeight* w = weights_->find(m->weight);
  if (w == nullptr) return fail(c.node, "weight '" + m->weight + "' not on the GPU");
  if (w->row_len != width || width % 32 != 0) {
    return fail(c.node, "weight '" + m->weight + "' rows have " + std::to_string(w->row_len) +
                            " elements, the node wants " + std::to_string(width) +
                            " (a multiple of 32)");
  }
  return launched(
      c.node, "get_rows",
      launch_get_rows_weight(w->type, w->data, w->row_bytes, w->rows, width, c.i32_in(0), n_rows,
                             m->scale, c.f32_out(), static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_rms_norm(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RmsNormMeta* m, meta<graph::RmsNormMeta>(c.node));
  const float* w = nullptr;
  if (!m->weight.empty()) {
    const DeviceWeight* v = weights_->find(m->weight);
    if (v == nullptr) return fail(c.node, "weight '" + m->weight + "' not on the GPU");
    w = reinterpret_cast<const float*>(v->data);
  }
  const int64_t dim = c.node.shape.ne[0], rows = c.node.shape.ne[1];
  const int64_t group = m->group > 0 ? m->group : dim;
  if (dim % group != 0) {
    return fail(c.node, "row length " + std::to_string(dim) + " is not a multiple of the group " +
                            std::to_string(group));
  }
  return launched(c.node, "rms_norm",
                  launch_rms_norm(c.f32_in(0), w, rows * (dim / group), group, m->eps, c.f32_out(),
                                  stream_.get()));
}

Status CudaBackend::run_rope(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::RopeMeta* m, meta<graph::RopeMeta>(c.node));
  const float* factors = nullptr;
  if (!m->freq_factors.empty()) {
    const DeviceWeight* v = weights_->find(m->freq_factors);
    if (v == nullptr) return fail(c.node, "weight '" + m->freq_factors + "' not on the GPU");
    factors = reinterpret_cast<const float*>(v->data);
  }
  if (m->n_rot <= 0 || m->n_rot % 2 != 0 || m->n_rot > m->head_dim || m->head_dim % 2 != 0 ||
      m->n_heads * m->head_dim != c.node.shape.ne[0] || !(m->freq_base > 0.0f)) {
    return fail(c.node, "rope shape: n_rot " + std::to_string(m->n_rot) + ", head_dim " +
                            std::to_string(m->head_dim) + ", n_heads " +
                            std::to_string(m->n_heads) + ", row " +
                            std::to_string(c.node.shape.ne[0]));
  }
  return launched(c.node, "rope",
                  launch_rope(c.f32_in(0), c.node.shape.ne[1], m->n_heads, m->head_dim, m->n_rot,
                              c.i32_in(1), m->freq_base, m->freq_scale, factors,
                              m->mode == graph::RopeMode::kNeox, c.f32_out(), stream_.get()));
}

Status CudaBackend::run_kv_store(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::KvMeta* m, meta<graph::KvMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return fail(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->head_dim));
  return launched(
      c.node, "kv_store",
      launch_kv_store(c.f32_in(0), c.f32_in(1), c.i32_in(2), m->n_tokens,
                      m->n_head_kv * m->head_dim, c.kv->n_ctx, c.kv->k_type, c.kv->v_type,
                      c.k_cache, c.v_cache, static_cast<int*>(err_.data()), stream_.get()));
}

Status CudaBackend::run_attention(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::AttentionMeta* m, meta<graph::AttentionMeta>(c.node));
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return fail(c.node, "no KV cache for layer " + std::to_string(m->layer));
  }
  if (!attention_head_dim_ok(m->head_dim) || m->n_head_kv <= 0 || m->n_head % m->n_head_kv != 0 ||
      m->n_head * m->head_dim != c.node.shape.ne[0]) {
    return fail(c.node, "attention shape the kernel refuses: n_head " + std::to_string(m->n_head) +
                            ", n_head_kv " + std::to_string(m->n_head_kv) + ", head_dim " +
                            std::to_string(m->head_dim) + " (32, 64, 96, 128 or 256), row " +
                            std::to_string(c.node.shape.ne[0]));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->head_dim));
  if (c.out == c.in[0]) return fail(c.node, "output aliases the query buffer");
  AttentionArgs a;
  a.q = c.f32_in(0);
  a.k_cache = c.k_cache;
  a.v_cache = c.v_cache;
  a.k_type = c.kv->k_type;
  a.v_type = c.kv->v_type;
  if (m->packed_qkv) {  // one token's [q | k | v] row (a FusedQKV output)
    if (c.n_in != 2 || c.node.shape.ne[1] != 1) {
      return fail(c.node, "packed q|k|v attention takes (packed, positions) for one token");
    }
    const int64_t q_dim = m->n_head * m->head_dim, kv_dim = m->n_head_kv * m->head_dim;
    a.positions = c.i32_in(1);
    a.batch_k = c.f32_in(0) + q_dim;
    a.batch_v = c.f32_in(0) + q_dim + kv_dim;
  } else {
    a.positions = c.i32_in(2);
    if (c.n_in >= 5) {
      a.batch_k = c.f32_in(3);
      a.batch_v = c.f32_in(4);
    }
  }
  a.n_tokens = c.node.shape.ne[1];
  a.n_ctx = c.kv->n_ctx;
  a.n_head = m->n_head;
  a.n_head_kv = m->n_head_kv;
  a.head_dim = m->head_dim;
  a.scale = m->scale;
  a.sliding_window = m->sliding_window;
  a.out = c.f32_out();
  a.err = static_cast<int*>(err_.data());
  return launched(c.node, "attention", launch_attention(a, stream_.get()));
}

Status CudaBackend::run_elementwise(const Call& c) {
  const int64_t n = c.node.shape.elements();
  Ew op;
  float s = 1.0f;
  switch (c.node.op) {
    case Op::kAdd:
      op = Ew::kAdd;
      break;
    case Op::kMul:
      op = Ew::kMul;
      break;
    case Op::kScale: {
      MINFER_ASSIGN_OR_RETURN(const graph::ScaleMeta* m, meta<graph::ScaleMeta>(c.node));
      op = Ew::kScale;
      s = m->scale;
      break;
    }
    case Op::kSilu:
      op = Ew::kSilu;
      break;
    case Op::kGelu:
      op = Ew::kGelu;
      break;
    case Op::kSwiGLU:
      op = Ew::kSwiGLU;
      break;
    case Op::kGeGLU:
      op = Ew::kGeGLU;
      break;
    default:
      return fail(c.node, "not an elementwise op");
  }
  const bool binary = op == Ew::kAdd || op == Ew::kMul || op == Ew::kSwiGLU || op == Ew::kGeGLU;
  if (c.in[0] == nullptr || (binary && (c.n_in < 2 || c.in[1] == nullptr))) {
    return fail(c.node, "missing input");
  }
  return launched(c.node, "elementwise",
                  launch_elementwise(op, c.f32_in(0), binary ? c.f32_in(1) : nullptr, s, n,
                                     c.f32_out(), stream_.get()));
}

Result<const float*> CudaBackend::normalized_input(const Call& c, const graph::InputNorm& norm,
                                                   int64_t dim) {
  if (!norm.on) return c.f32_in(0);
  const int64_t rows = c.node.shape.ne[1];
  MINFER_ASSIGN_OR_RETURN(float* x, scratch(c.node, static_cast<size_t>(rows * dim) * 4));
  MINFER_RETURN_IF_ERROR(launched(
      c.node, "rms_norm",
      launch_rms_norm(c.f32_in(0), norm_weight(norm), rows, dim, norm.eps, x, stream_.get())));
  return static_cast<const float*>(x);
}

Q8Input CudaBackend::q8_input(const Call& c, const graph::InputNorm& norm, int64_t dim) const {
  Q8Input in;
  in.x = c.f32_in(0);
  in.in_dim = dim;
  in.rms_norm = norm.on;
  in.eps = norm.eps;
  in.norm_weight = norm_weight(norm);
  return in;
}

Status CudaBackend::run_fused_qkv(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedQkvMeta* m, meta<graph::FusedQkvMeta>(c.node));
  if (!fused_qkv_ok(c.node, *weights_)) {
    return fail(c.node, "weights or shapes the fused q|k|v kernel refuses (head_dim " +
                            std::to_string(m->rope.head_dim) + ", tokens " +
                            std::to_string(c.node.shape.ne[1]) + ")");
  }
  if (c.kv == nullptr || c.k_cache == nullptr || c.v_cache == nullptr) {
    return fail(c.node, "no KV cache for layer " + std::to_string(m->kv.layer));
  }
  MINFER_RETURN_IF_ERROR(cache_types_status(c.node, *c.kv, m->kv.head_dim));
  if (c.out == c.in[0]) return fail(c.node, "output aliases the input");
  auto vec = [&](const std::string& name) -> const float* {
    if (name.empty()) return nullptr;
    return reinterpret_cast<const float*>(weights_->find(name)->data);
  };
  FusedQkvArgs a;
  const std::string* names[3] = {&m->q_weight, &m->k_weight, &m->v_weight};
  const std::string* biases[3] = {&m->q_bias, &m->k_bias, &m->v_bias};
  for (int i = 0; i < 3; ++i) {
    const DeviceWeight* w = weights_->find(*names[i]);
    a.type[i] = w->type;
    a.w[i] = w->data;
    a.row_bytes[i] = w->row_bytes;
    a.rows[i] = w->rows;
    a.bias[i] = vec(*biases[i]);
  }
  a.in_dim = m->in_dim;
  a.q8_gemv = a.type[0] == a.type[1] && a.type[1] == a.type[2] &&
              use_q8(a.type[0], m->in_dim, c.node.shape.ne[1]);
  if (a.q8_gemv) {
    a.q8 = q8_input(c, m->in_norm, m->in_dim);
    a.x = a.q8.x;
  } else {
    MINFER_ASSIGN_OR_RETURN(a.x, normalized_input(c, m->in_norm, m->in_dim));
  }
  a.out = c.f32_out();
  a.n_head = m->n_head;
  a.n_head_kv = m->kv.n_head_kv;
  a.head_dim = m->rope.head_dim;
  a.n_rot = m->rope.n_rot;
  a.neox = m->rope.mode == graph::RopeMode::kNeox;
  a.freq_base = m->rope.freq_base;
  a.freq_scale = m->rope.freq_scale;
  a.freq_factors = vec(m->rope.freq_factors);
  a.q_norm = vec(m->q_norm);
  a.k_norm = vec(m->k_norm);
  a.eps = m->norm_eps;
  a.positions = c.i32_in(1);
  a.n_ctx = c.kv->n_ctx;
  a.k_type = c.kv->k_type;
  a.v_type = c.kv->v_type;
  a.k_cache = c.k_cache;
  a.v_cache = c.v_cache;
  a.err = static_cast<int*>(err_.data());
  return launched(c.node, "fused_qkv", launch_fused_qkv(a, stream_.get()));
}

Status CudaBackend::run_fused_ffn(const Call& c) {
  MINFER_ASSIGN_OR_RETURN(const graph::FusedFfnMeta* m, meta<graph::FusedFfnMeta>(c.node));
  if (!fused_ffn_ok(c.node, *weights_)) {
    return fail(c.node, "weights '" + m->gate_weight + "' / '" + m->up_weight +
                            "' or the shape do not fit the fused FFN kernel");
  }
  if (c.out == c.in[0]) return fail(c.node, "output aliases the input");
  const DeviceWeight* g = weights_->find(m->gate_weight);
  const DeviceWeight* u = weights_->find(m->up_weight);
  const int64_t n_tokens = c.node.shape.ne[1];
  if (use_q8(g->type, m->in_dim, n_tokens)) {
    return launched(
        c.node, "ffn_q8",
        launch_ffn_q8(g->type, g->data, u->data, g->row_bytes, m->n_ff,
                      q8_input(c, m->in_norm, m->in_dim), m->gelu, c.f32_out(), stream_.get()));
  }
  MINFER_ASSIGN_OR_RETURN(const float* x, normalized_input(c, m->in_norm, m->in_dim));
  return launched(c.node, "fused_ffn",
                  launch_fused_ffn(g->type, g->data, u->data, g->row_bytes, m->n_ff, m->in_dim, x,
                                   n_tokens, m->gelu, c.f32_out(), stream_.get()));
}

}  // namespace

bool available() {
  return Device::get() != nullptr;
}

std::string unavailable_reason() {
  return available() ? "" : Device::unavailable_reason();
}

Result<std::unique_ptr<backend::Backend>> create_backend(const model::Weights& weights) {
  if (!available()) return Status::error(unavailable_reason());
  MINFER_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceWeights> dw, DeviceWeights::get(weights));
  MINFER_ASSIGN_OR_RETURN(Stream stream, Stream::create());
  MINFER_ASSIGN_OR_RETURN(Event done, Event::create());
  MINFER_ASSIGN_OR_RETURN(DeviceBuffer err, DeviceBuffer::allocate(kErrWords * sizeof(int)));
  MINFER_CUDA_CHECK(cudaMemset(err.data(), 0, kErrWords * sizeof(int)));
  int* err_host = nullptr;
  MINFER_CUDA_CHECK(cudaMallocHost(&err_host, kErrWords * sizeof(int)));
  std::memset(err_host, 0, kErrWords * sizeof(int));
  return std::unique_ptr<backend::Backend>(
      new CudaBackend(std::move(dw), std::move(stream), std::move(done), std::move(err), err_host));
}

}  // namespace minfer::cuda
