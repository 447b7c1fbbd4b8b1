#include "runtime/kv_cache.h"

namespace minfer::runtime {

Result<KvCache> KvCache::create(backend::Backend* owner, int64_t n_layer, int64_t n_ctx,
                                int64_t row_elements, graph::DType type) {
  if (type == graph::DType::kI32) return Status::error("KV cache type i32 is not supported");
  KvCache c;
  c.owner_ = owner;
  c.n_ctx_ = n_ctx;
  c.type_ = type;
  const size_t region = static_cast<size_t>(n_ctx * row_elements) * graph::dtype_size(type);
  for (int64_t il = 0; il < n_layer; ++il) {
    backend::KvPair p;
    p.dtype = type;
    p.n_ctx = n_ctx;
    MINFER_ASSIGN_OR_RETURN(p.k, owner->alloc_buffer(region));
    c.layers_.push_back(p);  // owned from here on: freed by the destructor on error
    MINFER_ASSIGN_OR_RETURN(c.layers_.back().v, owner->alloc_buffer(region));
    c.bytes_ += 2 * region;
  }
  return c;
}

KvCache& KvCache::operator=(KvCache&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    layers_ = std::move(other.layers_);
    n_ctx_ = other.n_ctx_;
    type_ = other.type_;
    bytes_ = other.bytes_;
    other.layers_.clear();
    other.owner_ = nullptr;
  }
  return *this;
}

KvCache::~KvCache() {
  release();
}

void KvCache::release() {
  if (owner_ == nullptr) return;
  for (const auto& p : layers_) {
    if (p.k != backend::kNoBuffer) owner_->free_buffer(p.k);
    if (p.v != backend::kNoBuffer) owner_->free_buffer(p.v);
  }
  layers_.clear();
}

}  // namespace minfer::runtime
