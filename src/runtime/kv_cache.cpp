#include "runtime/kv_cache.h"

#include <algorithm>
#include <string>

namespace minfer::runtime {
namespace {

constexpr const char* kAllowed = "f32, f16, q8_0";

bool cache_type_ok(quant::TensorType t) {
  return t == quant::TensorType::F32 || t == quant::TensorType::F16 || t == quant::TensorType::Q8_0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Bytes of one region (n_ctx rows) of `type`, or an error naming the problem.
Result<size_t> region_bytes(quant::TensorType type, const KvCacheShape& s) {
  const std::string name = lower(quant::type_name(type));
  if (!cache_type_ok(type)) {
    return Status::invalid_argument("KV cache type " + name + " is not supported (" + kAllowed +
                                    ")");
  }
  const int64_t block = quant::type_traits(type).block_size;
  if (s.head_dim % block != 0) {
    return Status::invalid_argument("KV cache type " + name + " needs head_dim a multiple of " +
                                    std::to_string(block) + "; the model's head_dim is " +
                                    std::to_string(s.head_dim) + " (use f16 or f32)");
  }
  MINFER_ASSIGN_OR_RETURN(uint64_t row, quant::row_bytes(type, s.n_head_kv * s.head_dim));
  return static_cast<size_t>(row) * static_cast<size_t>(s.n_ctx);
}

}  // namespace

std::optional<quant::TensorType> preferred_cache_type(
    std::span<const backend::Backend* const> backends, const KvCacheShape& shape) {
  for (const backend::Backend* b : backends) {
    if (auto t = b->default_cache_type(shape.n_layer, shape.n_head_kv * shape.head_dim)) return t;
  }
  return std::nullopt;
}

Result<quant::TensorType> parse_cache_type(std::string_view name) {
  const std::string n = lower(name);
  if (n == "f32") return quant::TensorType::F32;
  if (n == "f16") return quant::TensorType::F16;
  if (n == "q8_0") return quant::TensorType::Q8_0;
  return Status::invalid_argument("cache type '" + std::string(name) + "' is not supported (" +
                                  kAllowed + ")");
}

Result<KvCache> KvCache::create(backend::Backend* owner, const KvCacheShape& shape,
                                quant::TensorType k_type, quant::TensorType v_type) {
  const std::vector<backend::Backend*> owners(
      static_cast<size_t>(std::max<int64_t>(shape.n_layer, 0)), owner);
  return create(owners, shape, k_type, v_type);
}

Result<KvCache> KvCache::create(std::span<backend::Backend* const> layer_owner,
                                const KvCacheShape& shape, quant::TensorType k_type,
                                quant::TensorType v_type) {
  if (shape.n_layer < 0 || shape.n_ctx < 1 || shape.n_head_kv < 1 || shape.head_dim < 1 ||
      static_cast<int64_t>(layer_owner.size()) != shape.n_layer) {
    return Status::invalid_argument(
        "KV cache: invalid shape (n_layer " + std::to_string(shape.n_layer) + ", n_ctx " +
        std::to_string(shape.n_ctx) + ", n_head_kv " + std::to_string(shape.n_head_kv) +
        ", head_dim " + std::to_string(shape.head_dim) + ", " + std::to_string(layer_owner.size()) +
        " layer owners)");
  }
  MINFER_ASSIGN_OR_RETURN(const size_t k_region, region_bytes(k_type, shape));
  MINFER_ASSIGN_OR_RETURN(const size_t v_region, region_bytes(v_type, shape));
  KvCache c;
  c.n_ctx_ = shape.n_ctx;
  c.k_type_ = k_type;
  c.v_type_ = v_type;
  for (int64_t il = 0; il < shape.n_layer; ++il) {
    backend::Backend* owner = layer_owner[static_cast<size_t>(il)];
    backend::KvPair p;
    p.k_type = k_type;
    p.v_type = v_type;
    p.n_ctx = shape.n_ctx;
    MINFER_ASSIGN_OR_RETURN(p.k, owner->alloc_buffer(k_region));
    // Owned from here on: freed by the destructor on error.
    c.owners_.push_back(owner);
    c.layers_.push_back(p);
    MINFER_ASSIGN_OR_RETURN(c.layers_.back().v, owner->alloc_buffer(v_region));
    c.bytes_ += k_region + v_region;
  }
  return c;
}

KvCache& KvCache::operator=(KvCache&& other) noexcept {
  if (this != &other) {
    release();
    owners_ = std::move(other.owners_);
    layers_ = std::move(other.layers_);
    n_ctx_ = other.n_ctx_;
    k_type_ = other.k_type_;
    v_type_ = other.v_type_;
    bytes_ = other.bytes_;
    other.layers_.clear();
    other.owners_.clear();
  }
  return *this;
}

KvCache::~KvCache() {
  release();
}

void KvCache::release() {
  for (size_t il = 0; il < layers_.size(); ++il) {
    const backend::KvPair& p = layers_[il];
    if (p.k != backend::kNoBuffer) owners_[il]->free_buffer(p.k);
    if (p.v != backend::kNoBuffer) owners_[il]->free_buffer(p.v);
  }
  layers_.clear();
  owners_.clear();
}

}  // namespace minfer::runtime
