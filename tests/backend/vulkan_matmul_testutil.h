// Weights for the Vulkan matmul tests: every weight type the GPU kernels
// decode, random rows quantized with the reference quantizer (and what they
// decode to), and the f64 host product they are checked against.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/shader/encoders.h"
#include "quant/reference.h"

namespace minfer::vulkan::testing {

// Forces how encode_matmul runs for a scope.
class Forced {
 public:
  explicit Forced(shader::MatmulForTesting how) { shader::force_matmul_for_testing(how); }
  ~Forced() { shader::force_matmul_for_testing({}); }
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

// Every type the GPU weight kernels decode: quant::is_weight_type's list.
inline constexpr quant::TensorType kWeightTypes[] = {
    quant::TensorType::F32,  quant::TensorType::F16,  quant::TensorType::BF16,
    quant::TensorType::Q4_0, quant::TensorType::Q4_1, quant::TensorType::Q5_0,
    quant::TensorType::Q5_1, quant::TensorType::Q8_0, quant::TensorType::Q2_K,
    quant::TensorType::Q3_K, quant::TensorType::Q4_K, quant::TensorType::Q5_K,
    quant::TensorType::Q6_K, quant::TensorType::MXFP4};

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;  // what the GPU must compute with
};

// `rows` rows: the first min(rows, distinct) encoded from random values, the
// rest repeating them (so that large benchmark matrices are cheap to make).
inline Weights encode_weights(quant::TensorType type, int64_t rows, int64_t in_dim, uint32_t seed,
                              int64_t distinct = INT64_MAX) {
  const int64_t n = std::min(rows, distinct);
  const auto values = cpu::testing::random_floats(n * in_dim, seed);
  const uint64_t rb = quant::row_bytes(type, in_dim).value();
  Weights w;
  w.bytes.resize(rb * rows);
  w.decoded.resize(n * in_dim);
  for (int64_t r = 0; r < n; ++r) {
    if (type == quant::TensorType::F32) {
      std::memcpy(w.bytes.data() + r * rb, values.data() + r * in_dim, rb);
    } else {
      EXPECT_TRUE(
          quant::quantize_row(type, values.data() + r * in_dim, w.bytes.data() + r * rb, in_dim)
              .is_ok());
    }
    EXPECT_TRUE(
        quant::dequantize_row(type, w.bytes.data() + r * rb, w.decoded.data() + r * in_dim, in_dim)
            .is_ok());
  }
  for (int64_t r = n; r < rows; ++r) {
    std::memcpy(w.bytes.data() + r * rb, w.bytes.data() + (r % n) * rb, rb);
  }
  return w;
}

// y[t][r] = dot(decoded row r, x[t]) in f64.
inline std::vector<double> reference(const Weights& w, const std::vector<float>& x, int64_t rows,
                                     int64_t in_dim, int64_t tokens) {
  std::vector<double> y(rows * tokens);
  const int64_t distinct = static_cast<int64_t>(w.decoded.size()) / in_dim;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = w.decoded.data() + (r % distinct) * in_dim;
      double s = 0;
      for (int64_t k = 0; k < in_dim; ++k) s += double(row[k]) * x[t * in_dim + k];
      y[t * rows + r] = s;
    }
  }
  return y;
}

}  // namespace minfer::vulkan::testing
