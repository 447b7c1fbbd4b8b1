// A host emulation of how the CUDA int8 paths quantize activations
// (q8_quantize.cuh): per 32-value unit a scale d = amax / 127 and q =
// round-half-even(x * (127 / amax)) in f32, amax taken over `span` values
// (32, or 256 where the K-quants' tensor-core products read the activations:
// Q8Input::scale_per_256). Tests compare kernels on int8 activations with
// the dequantized weights times these values, summed in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "quant/tensor_type.h"

namespace minfer::cuda::testing {

struct Quantized {
  std::vector<float> d;       // per 32-value unit
  std::vector<double> value;  // d * q per element
};

inline Quantized quantize_like_gpu(const std::vector<float>& x, size_t span = 32) {
  Quantized q;
  const size_t n = x.size();
  q.d.resize(n / 32);
  q.value.resize(n);
  for (size_t b = 0; b < n / span; ++b) {
    float amax = 0.0f;
    for (size_t i = 0; i < span; ++i) amax = std::max(amax, std::fabs(x[span * b + i]));
    const float d = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = 0; i < span; ++i) {
      q.value[span * b + i] = double(d) * std::nearbyint(x[span * b + i] * id);
    }
    for (size_t k = 0; k < span / 32; ++k) q.d[span / 32 * b + k] = d;
  }
  return q;
}

// The span of one activation scale where the tensor-core products take `type`.
inline size_t tensor_core_span(quant::TensorType type) {
  return quant::type_traits(type).block_size == 256 ? 256 : 32;
}

}  // namespace minfer::cuda::testing
