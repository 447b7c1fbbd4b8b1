// The KV cache: per layer, persistent K and V regions on the backend that runs
// the layer's attention (each layer's owner is the session's plan decision,
// graph::kv_placement), each holding n_ctx rows of n_head_kv * head_dim
// elements. K and V each have their own row type: f32, f16 or q8_0 (ggml's
// Q8_0 blocks of 32 values, for which head_dim must be a multiple of 32).
//
// Contract: regions are allocated once (create) and freed in the destructor;
// they survive graph rebuilds. create errors (naming the type and the
// allowed ones) for any other type or a head_dim q8_0 cannot split. Positions
// past n_ctx are the caller's error to prevent (runtime::Session checks the
// context limit before every forward). Not thread-safe; owned by one Session.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::runtime {

// Parses a cache type as llama.cpp spells it ("f32", "f16", "q8_0"; case
// insensitive); the error names the value and the allowed ones.
Result<quant::TensorType> parse_cache_type(std::string_view name);

struct KvCacheShape {
  int64_t n_layer = 0;
  int64_t n_ctx = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
};

// The cache type the first of `backends` with a preference for this shape
// wants (Backend::default_cache_type: Metal's f32 for small models), or
// nullopt when none has one. For runs whose user chose no cache type.
std::optional<quant::TensorType> preferred_cache_type(
    std::span<const backend::Backend* const> backends, const KvCacheShape& shape);

class KvCache {
 public:
  // layer_owner[il]: the backend that holds layer il's regions (one per layer).
  static Result<KvCache> create(std::span<backend::Backend* const> layer_owner,
                                const KvCacheShape& shape, quant::TensorType k_type,
                                quant::TensorType v_type);
  // Every layer on `owner`.
  static Result<KvCache> create(backend::Backend* owner, const KvCacheShape& shape,
                                quant::TensorType k_type, quant::TensorType v_type);
  KvCache() = default;
  KvCache(KvCache&& other) noexcept { *this = std::move(other); }
  KvCache& operator=(KvCache&& other) noexcept;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache();

  const backend::KvPair* layer(int64_t il) const {
    return il >= 0 && static_cast<size_t>(il) < layers_.size() ? &layers_[il] : nullptr;
  }
  // The backend holding layer il's regions (nullptr past the last layer).
  backend::Backend* owner(int64_t il) const {
    return il >= 0 && static_cast<size_t>(il) < owners_.size() ? owners_[il] : nullptr;
  }
  int64_t n_ctx() const { return n_ctx_; }
  quant::TensorType k_type() const { return k_type_; }
  quant::TensorType v_type() const { return v_type_; }
  size_t bytes() const { return bytes_; }

 private:
  void release();
  std::vector<backend::Backend*> owners_;  // per layer
  std::vector<backend::KvPair> layers_;
  int64_t n_ctx_ = 0;
  quant::TensorType k_type_ = quant::TensorType::F32;
  quant::TensorType v_type_ = quant::TensorType::F32;
  size_t bytes_ = 0;
};

}  // namespace minfer::runtime
