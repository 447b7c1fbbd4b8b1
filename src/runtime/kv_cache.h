// The KV cache: per layer, persistent K and V regions on the backend that runs
// the layer's attention, each holding n_ctx rows of n_head_kv * head_dim
// elements (f32 or f16).
//
// Contract: regions are allocated once (create) and freed in the destructor;
// they survive graph rebuilds. Positions past n_ctx are the caller's error to
// prevent (runtime::Session checks the context limit before every forward).
// Not thread-safe; owned by one Session.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "graph/ir.h"

namespace minfer::runtime {

class KvCache {
 public:
  static Result<KvCache> create(backend::Backend* owner, int64_t n_layer, int64_t n_ctx,
                                int64_t row_elements, graph::DType type);
  KvCache() = default;
  KvCache(KvCache&& other) noexcept { *this = std::move(other); }
  KvCache& operator=(KvCache&& other) noexcept;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache();

  const backend::KvPair* layer(int64_t il) const {
    return il >= 0 && static_cast<size_t>(il) < layers_.size() ? &layers_[il] : nullptr;
  }
  backend::Backend* owner() const { return owner_; }
  int64_t n_ctx() const { return n_ctx_; }
  graph::DType type() const { return type_; }
  size_t bytes() const { return bytes_; }

 private:
  void release();
  backend::Backend* owner_ = nullptr;
  std::vector<backend::KvPair> layers_;
  int64_t n_ctx_ = 0;
  graph::DType type_ = graph::DType::kF32;
  size_t bytes_ = 0;
};

}  // namespace minfer::runtime
