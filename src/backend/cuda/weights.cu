#include "backend/cuda/weights.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

#include "backend/cuda/kernels.h"

namespace minfer::cuda {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kHeadroom = 512 * kMiB;  // left free for activations and the KV cache

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

const DeviceWeight* DeviceWeights::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &it->second;
}

bool DeviceWeights::made_from(const model::Weights& weights) const {
  if (weights.all().size() != host_data_.size()) return false;
  for (size_t i = 0; i < host_data_.size(); ++i) {
    if (weights.all()[i].data != host_data_[i]) return false;
  }
  return true;
}

Result<std::shared_ptr<const DeviceWeights>> DeviceWeights::get(const model::Weights& weights) {
  static std::mutex mu;
  static std::map<const model::Weights*, std::weak_ptr<const DeviceWeights>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(&weights); it != cache.end()) {
    auto live = it->second.lock();
    if (live && live->made_from(weights)) return live;
  }
  size_t total = 0;
  for (const model::WeightView& v : weights.all()) {
    if (!has_decoder(v.type)) {
      return Status::error("tensor '" + v.name + "' has type " +
                           std::string(quant::type_traits(v.type).name) +
                           ", which has no CUDA kernel");
    }
    if (v.type != quant::TensorType::F32 && v.row_length() % 32 != 0) {
      return Status::error("tensor '" + v.name + "' has rows of " +
                           std::to_string(v.row_length()) +
                           " elements, not a multiple of 32 (the CUDA kernels' chunk)");
    }
    total += align_up(v.nbytes);
  }
  size_t free_b = 0, total_b = 0;
  MINFER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (total + kHeadroom > free_b) {
    return Status::error("out of device memory: the weights need " +
                         std::to_string(total / kMiB) + " MiB (+" +
                         std::to_string(kHeadroom / kMiB) + " MiB headroom), " +
                         std::to_string(free_b / kMiB) + " MiB free");
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto dw = std::make_shared<DeviceWeights>();
  MINFER_ASSIGN_OR_RETURN(dw->arena_, DeviceBuffer::allocate(total));
  size_t offset = 0;
  auto* base = static_cast<uint8_t*>(dw->arena_.data());
  for (const model::WeightView& v : weights.all()) {
    MINFER_CUDA_CHECK(cudaMemcpy(base + offset, v.data, v.nbytes, cudaMemcpyHostToDevice));
    DeviceWeight w;
    w.type = v.type;
    w.rows = v.rows();
    w.row_len = v.row_length();
    w.row_bytes = v.row_bytes();
    w.data = base + offset;
    dw->index_[v.name] = w;
    dw->host_data_.push_back(v.data);
    offset += align_up(v.nbytes);
  }
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  std::fprintf(stderr, "minfer: CUDA: uploaded %zu tensors (%.1f MiB) in %.0f ms\n",
               weights.all().size(), static_cast<double>(total) / kMiB, dt.count() * 1e3);
  cache[&weights] = dw;
  return std::shared_ptr<const DeviceWeights>(std::move(dw));
}

}  // namespace minfer::cuda
