#include "backend/metal/metal_backend.h"

namespace minfer::metal {

quant::TensorType default_cache_type(int64_t n_layer, int64_t n_kv_embd) {
  constexpr int64_t kF16From = 8192;  // n_layer * n_kv_embd of the 7B class
  return n_layer * n_kv_embd >= kF16From ? quant::TensorType::F16 : quant::TensorType::F32;
}

}  // namespace minfer::metal
