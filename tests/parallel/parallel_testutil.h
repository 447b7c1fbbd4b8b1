// Helpers the communicator tests share.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace minfer::parallel::testing {

// n values of a normal distribution of sd 100 (sums of them round): one
// rank's buffer.
inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace minfer::parallel::testing
