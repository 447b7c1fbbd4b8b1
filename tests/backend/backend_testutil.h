// Helpers shared by the CPU backend tests: deterministic random data and
// encoding/decoding of whole rows through the scalar reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "quant/reference.h"
#include "quant/tensor_type.h"

namespace minfer::cpu::testing {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

inline std::vector<uint8_t> encode(quant::TensorType type, const std::vector<float>& v) {
  const auto bytes = quant::row_bytes(type, static_cast<int64_t>(v.size()));
  EXPECT_TRUE(bytes.is_ok()) << bytes.message();
  std::vector<uint8_t> out(bytes.is_ok() ? *bytes : 0);
  const Status s = quant::quantize_row(type, v.data(), out.data(), static_cast<int64_t>(v.size()));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

inline std::vector<float> decode(quant::TensorType type, const void* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const Status s = quant::dequantize_row(type, data, out.data(), n);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return out;
}

}  // namespace minfer::cpu::testing
