// The Backend interface of ShaderBackend (contract in shader_backend.h): weights,
// buffers over the pool, host copies, the bounded synchronize and the error
// words. Ops are in op_support.cpp, op_runners.cpp and op_runners_moe.cpp.
#include "backend/shader/shader_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_options.h"
#include "backend/device_errors.h"
#include "backend/shader/encode_activation.h"
#include "backend/shader/encode_matmul_tiled.h"
#include "backend/shader/encoders.h"
#include "backend/shader/kernel_args.h"
#include "backend/shader/shader_backend_impl.h"
#include "backend/shader/shader_options.h"
#include "base/log.h"
#include "base/progress.h"

namespace minfer::shader {
namespace detail {
namespace {

constexpr uint64_t kBarMinBytes = uint64_t{64} << 20;  // smaller uploads need no bar
constexpr uint64_t kErrBytes = MINFER_ERR_WORDS * sizeof(uint32_t);
// Buffers up to this size get memory the host maps where the device has it
// (MemoryUse::kHostAccess): the runner's inputs (token ids, positions, page
// tables), the argmax output and small staged values, written or read every
// step, then cost a memcpy instead of a staging copy's submission and wait.
// Decode activations of this size go there too: the kernels reach that
// memory as fast as the rest (docs/PERFORMANCE.md, "Constants and their measurements").
constexpr uint64_t kHostAccessMaxBytes = uint64_t{64} << 10;

MemoryUse memory_use(uint64_t bytes) {
  return bytes <= kHostAccessMaxBytes ? MemoryUse::kHostAccess : MemoryUse::kDevice;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

bool overlap(const BufferRange& a, const BufferRange& b) {
  return a.buffer != nullptr && a.buffer == b.buffer && a.offset < b.offset + b.size &&
         b.offset < a.offset + a.size;
}

}  // namespace

ShaderBackend::ShaderBackend(std::string name, std::shared_ptr<Device> device,
                             const Options& options)
    : name_(std::move(name)),
      device_(std::move(device)),
      weights_(*device_),
      pool_(*device_),
      rec_(*device_, options.section<backend::GpuOptions>().gpu_timeout_s),
      profiling_(options.op_profile && device_->info().timestamp_period_ns > 0),
      replay_enabled_(!options.section<ShaderOptions>().no_gpu_replay),
      map_weights_(device_->info().host_wrap_alignment > 0 &&
                   !options.section<ShaderOptions>().weight_copy) {
  for (size_t i = 0; i < matmul_types_.size(); ++i) {
    if (quant::find_type_traits(static_cast<uint32_t>(i)) == nullptr) continue;  // no such type
    const auto t = static_cast<quant::TensorType>(i);
    matmul_types_[i] = matmul_kernel(*device_, t).is_ok() ? 1 : 0;
    get_rows_types_[i] = get_rows_kernel(*device_, t).is_ok() ? 1 : 0;
    matmul_id_types_[i] = matmul_id_kernel(*device_, t).is_ok() ? 1 : 0;
    tiled_types_[i] = matmul_tiled_kernel(*device_, t).is_ok() ? 1 : 0;
  }
  tiled_min_tokens_ = matmul_tiled_min_tokens(*device_);
}

Status ShaderBackend::init(const model::Weights& weights) {
  std::vector<HostTensor> tensors;
  uint64_t total = 0;
  for (const model::WeightView& w : weights.all()) {
    tensors.push_back({w.name, w.type, w.dims, std::as_bytes(std::span(w.data, w.nbytes))});
    total += w.nbytes;
  }
  order_for_fused_kernels(tensors);
  const auto start = std::chrono::steady_clock::now();
  ProgressBar bar(stderr, ProgressBar::shown_on(stderr, total, kBarMinBytes),
                  "minfer: " + name_ + ": uploading weights", total);
  const auto shown = [&bar](uint64_t done, uint64_t) { bar.update(done); };
  MINFER_RETURN_IF_ERROR(map_weights_ ? weights_.map_all(tensors, shown)
                                      : weights_.upload_all(tensors, shown));
  bar.finish();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%.2f s", s);
  const std::string in_place =
      map_weights_ ? ", " + mib(weights_.mapped_bytes()) + " read in place from the file" : "";
  log_info(name_ + ": " + std::to_string(tensors.size()) + " weights, " +
           mib(weights_.registered_bytes()) + in_place + ", " + mib(weights_.device_bytes()) +
           " of device memory (" + (device_->info().unified_memory ? "mapped" : "staged") + "), " +
           secs);
  MINFER_ASSIGN_OR_RETURN(err_, pool_.alloc(kErrBytes, MemoryUse::kHostAccess));
  const std::vector<std::byte> zeros(kErrBytes);
  return device_->write_buffer(*pool_.allocation(err_)->buffer, pool_.allocation(err_)->offset,
                               zeros);
}

const DeviceWeight* ShaderBackend::weight(std::string_view name) const {
  auto w = weights_.lookup(name);
  return w.is_ok() ? *w : nullptr;
}

int64_t ShaderBackend::rows_per_binding(const DeviceWeight& w) const {
  if (w.shape.empty()) return 0;
  int64_t rows = 1;
  for (size_t i = 1; i < w.shape.size(); ++i) rows *= w.shape[i];
  if (binds_whole(w)) return rows;
  auto row = quant::row_bytes(w.type, w.shape[0]);
  if (!row.is_ok() || *row == 0) return 0;
  const uint64_t align = std::max<uint64_t>(binding_alignment(), 1);
  const uint64_t step =
      std::lcm(align / std::gcd(align, uint64_t{4}), align / std::gcd(align, *row));
  // Less a word: a weight's binding is rounded up to whole 32-bit words.
  const uint64_t range = device_->info().limits.max_storage_buffer_range;
  if (range <= 4) return 0;
  const uint64_t max = range - 4;
  return static_cast<int64_t>(std::min<uint64_t>(max / *row / step * step, uint64_t(rows)));
}

bool ShaderBackend::has_matmul(quant::TensorType type) const {
  const auto i = static_cast<size_t>(type);
  return i < matmul_types_.size() && matmul_types_[i] == 1;
}

bool ShaderBackend::has_matmul_id(quant::TensorType type) const {
  const auto i = static_cast<size_t>(type);
  return i < matmul_id_types_.size() && matmul_id_types_[i] == 1;
}

bool ShaderBackend::has_get_rows(quant::TensorType type) const {
  const auto i = static_cast<size_t>(type);
  return i < get_rows_types_.size() && get_rows_types_[i] == 1;
}

// Every fused op the table runs, but not kRmsNorm: the row matmul can fold
// an input norm (MatmulPrologue), but on the H200 that made the 0.5B decode
// slower (426 against 508 t/s with the norm as its own dispatch), so fused
// nodes keep theirs.
bool ShaderBackend::supports_fused(Op fused) const {
  return fused != Op::kRmsNorm && fused < Op::kCount && op_entry(fused).run != nullptr;
}

bool ShaderBackend::supports_op(const Node& node) const {
  if (node.op >= Op::kCount) return false;
  // An output one binding cannot hold (the logits of many rows of a large
  // vocabulary under a 128 MiB maxStorageBufferRange) is the next backend's.
  if (node.bytes() > pool_.max_allocation()) return false;
  return op_entry(node.op).supports(node, *this);
}

Result<BufferId> ShaderBackend::alloc_buffer(size_t bytes) {
  auto id = pool_.alloc(bytes, memory_use(bytes));
  if (!id.is_ok()) return id.status().with_context(name_);
  return *id;
}

Result<BufferId> ShaderBackend::alloc_fresh(size_t bytes) {
  auto id = pool_.alloc_fresh(bytes, memory_use(bytes));
  if (!id.is_ok()) return id.status().with_context(name_);
  return *id;
}

void ShaderBackend::drop_replays() {
  if (replaying_) return;  // never while a replayed list may run: synchronize first
  replays_.clear();
}

Result<bool> ShaderBackend::begin_split(uint64_t key) {
  capturing_.reset();
  if (!replay_enabled_ || profiling_ || rec_.recording()) return false;
  auto it = replays_.find(key);
  if (it == replays_.end()) {
    if (replays_.size() < kMaxReplays) capturing_ = key;
    return false;
  }
  MINFER_RETURN_IF_ERROR(rec_.replay(*it->second.list, it->second.trail).with_context(name_));
  replaying_ = key;
  return true;
}

Status ShaderBackend::end_split() {
  if (capturing_) rec_.keep_next();
  return Status::ok();
}

void ShaderBackend::free_buffer(BufferId id) {
  if (id == err_) return;
  (void)synchronize();  // a replayed split may still bind it
  drop_replays();
  (void)pool_.free(id);  // an id that is not live changes nothing
}

size_t ShaderBackend::buffer_size(BufferId id) const {
  const Allocation* a = id == err_ ? nullptr : pool_.allocation(id);
  return a != nullptr ? a->size : 0;
}

BufferRange ShaderBackend::range(BufferId id) const {
  const Allocation* a = pool_.allocation(id);
  return a != nullptr ? a->range() : BufferRange{};
}

Status ShaderBackend::execute_node(const Node& node, std::span<const BufferId> inputs, BufferId out,
                                   const KvPair* kv) {
  if (node.op >= Op::kCount || op_entry(node.op).run == nullptr || !supports_op(node)) {
    return node_error(node, "not supported by the " + name_ + " backend");
  }
  Call call{node};
  call.n_in = inputs.size();
  call.kv = kv;
  if (inputs.size() > call.in.size()) return node_error(node, "too many inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == backend::kNoBuffer) continue;  // an input with no value (KV store)
    call.in[i] = range(inputs[i]);
    if (call.in[i].buffer == nullptr)
      return node_error(node, "input " + std::to_string(i) + " has no buffer");
  }
  if (node.bytes() > 0) {
    call.out = range(out);
    if (call.out.buffer == nullptr || call.out.size < node.bytes()) {
      return node_error(node, "output buffer missing or too small");
    }
  }
  if (kv != nullptr) {
    call.k_cache = range(kv->k);
    call.v_cache = range(kv->v);
  }
  // An op that is not element-wise in place (a matmul, a gather) writes an
  // output that overlaps an input into scratch, then copies it over.
  const bool aliased =
      !graph::op_traits(node.op).in_place &&
      std::any_of(call.in.begin(), call.in.begin() + static_cast<ptrdiff_t>(call.n_in),
                  [&](const BufferRange& r) { return overlap(r, call.out); });
  if (profiling_ && timed_in_split_ == 0) MINFER_RETURN_IF_ERROR(rec_.timestamp());
  if (!aliased) {
    MINFER_RETURN_IF_ERROR((this->*op_entry(node.op).run)(call));
  } else {
    const BufferRange target = call.out;
    MINFER_ASSIGN_OR_RETURN(call.out, scratch(kAliasSlot, target.size));
    MINFER_RETURN_IF_ERROR((this->*op_entry(node.op).run)(call));
    MINFER_RETURN_IF_ERROR(encode_unary(rec_, UnaryOp::kScale, call.out, target,
                                        static_cast<int64_t>(node.bytes() / sizeof(float)), 1.0f,
                                        node.name));
  }
  if (!profiling_) return Status::ok();
  ++timed_in_split_;
  return rec_.timestamp();
}

std::vector<double> ShaderBackend::take_node_times() {
  return std::exchange(node_times_, {});
}

Status ShaderBackend::read_host(BufferId id, size_t offset, std::span<std::byte> dst) {
  MINFER_RETURN_IF_ERROR(synchronize());
  const Allocation* a = pool_.allocation(id);
  if (a == nullptr || offset + dst.size() > a->size) {
    return Status::out_of_range(name_ + ": read of " + std::to_string(dst.size()) + " bytes at " +
                                std::to_string(offset) + " outside buffer " + std::to_string(id));
  }
  return device_->read_buffer(*a->buffer, a->offset + offset, dst);
}

Status ShaderBackend::write_host(BufferId id, size_t offset, std::span<const std::byte> src) {
  MINFER_RETURN_IF_ERROR(synchronize());
  const Allocation* a = pool_.allocation(id);
  if (a == nullptr || offset + src.size() > a->size) {
    return Status::out_of_range(name_ + ": write of " + std::to_string(src.size()) + " bytes at " +
                                std::to_string(offset) + " outside buffer " + std::to_string(id));
  }
  return device_->write_buffer(*a->buffer, a->offset + offset, src);
}

Status ShaderBackend::synchronize() {
  if (!rec_.recording()) return Status::ok();
  const std::string trail = rec_.trail().describe();
  Status s = rec_.submit_and_wait();
  pool_.release_fresh();
  const size_t timed = std::exchange(timed_in_split_, 0);
  const std::optional<uint64_t> captured = std::exchange(capturing_, std::nullopt);
  const std::optional<uint64_t> replayed = std::exchange(replaying_, std::nullopt);
  if (!s && replayed) replays_.erase(*replayed);  // its list may still run: the device keeps it
  MINFER_RETURN_IF_ERROR(s.with_context(name_));
  if (captured) {
    Recorder::Kept kept = rec_.take_kept();
    if (kept.list) replays_[*captured] = std::move(kept);
  }
  const std::vector<double>& t = rec_.timestamps_s();
  for (size_t i = 0; i < timed && i + 1 < t.size(); ++i) node_times_.push_back(t[i + 1] - t[i]);
  return check_error_words(trail);
}

Result<std::optional<double>> ShaderBackend::memory_bandwidth_gbs() {
  MINFER_RETURN_IF_ERROR(synchronize());
  const uint64_t bytes = std::min<uint64_t>(uint64_t{256} << 20, pool_.max_allocation() / 2);
  MINFER_ASSIGN_OR_RETURN(PoolId a, pool_.alloc(bytes));
  auto b = pool_.alloc(bytes);
  if (!b.is_ok()) {
    (void)pool_.free(a);
    return b.status();
  }
  const auto n = static_cast<int64_t>(bytes / sizeof(float));
  double best = 0;
  Status s = Status::ok();
  for (int i = 0; i < 6 && s.is_ok(); ++i) {  // the first copy warms up
    const auto start = std::chrono::steady_clock::now();
    s = encode_unary(rec_, UnaryOp::kScale, range(a), range(*b), n, 1.0f, "bandwidth");
    if (s.is_ok()) s = rec_.submit_and_wait();
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.is_ok() && i > 0 && t > 0) best = std::max(best, 2.0 * double(bytes) / t / 1e9);
  }
  (void)pool_.free(a);
  (void)pool_.free(*b);
  MINFER_RETURN_IF_ERROR(s.with_context(name_ + ": bandwidth"));
  return std::optional<double>(best);
}

Status ShaderBackend::check_error_words(const std::string& trail) {
  const Allocation* a = pool_.allocation(err_);
  uint32_t w[MINFER_ERR_WORDS] = {};
  MINFER_RETURN_IF_ERROR(
      device_->read_buffer(*a->buffer, a->offset, std::as_writable_bytes(std::span(w))));
  if (w[0] == 0) return Status::ok();
  const std::vector<std::byte> zeros(kErrBytes);
  MINFER_RETURN_IF_ERROR(device_->write_buffer(*a->buffer, a->offset, zeros));
  return backend::device_error(w, name_, trail);
}

}  // namespace detail

Result<std::unique_ptr<backend::Backend>> create_shader_backend(std::string name,
                                                                std::shared_ptr<Device> device,
                                                                const model::Weights& weights,
                                                                const Options& options,
                                                                CacheTypePolicy cache_policy) {
  if (device == nullptr) return Status::invalid_argument("create_shader_backend: no device");
  auto b = std::make_unique<detail::ShaderBackend>(std::move(name), std::move(device), options);
  b->set_cache_policy(cache_policy);
  MINFER_RETURN_IF_ERROR(b->init(weights));
  return std::unique_ptr<backend::Backend>(std::move(b));
}

}  // namespace minfer::shader
