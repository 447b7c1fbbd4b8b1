// The deterministic random numbers behind synthetic models.
//
// Contract: the same seed gives the same sequence on every machine and
// compiler: integer arithmetic only (xoshiro256** seeded by splitmix64), and
// the bell-shaped samples are exact integer sums scaled by one constant,
// so no libm function is involved. Not thread-safe; give each
// thread (or each row) its own generator via for_stream().
#pragma once

#include <cstdint>
#include <string_view>

namespace minfer::synth {

class SynthRng {
 public:
  explicit SynthRng(uint64_t seed) {
    for (auto& s : state_) s = splitmix64(seed);
  }

  // An independent generator for (seed, name, index): e.g. one per tensor row,
  // so that rows can be generated in any order or in parallel.
  static SynthRng for_stream(uint64_t seed, std::string_view name, uint64_t index) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the name
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    uint64_t mixed = seed ^ (h * 0x9e3779b97f4a7c15ull) ^ (index * 0xd1b54a32d192ed03ull);
    return SynthRng(mixed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform integer in [0, n), n > 0 (multiply-shift; the tiny bias is irrelevant here).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  // Approximately standard normal: the Irwin-Hall sum of eight 16-bit uniforms,
  // centred and scaled to unit variance. Support is +-4.9 sigma; kurtosis 2.85
  // against the Gaussian's 3 — close enough for weights whose only job is to
  // keep activations at a realistic scale.
  float gaussian() {
    const uint64_t a = next(), b = next();
    int64_t sum = 0;
    for (int i = 0; i < 4; ++i) {
      sum += static_cast<int64_t>((a >> (16 * i)) & 0xffff);
      sum += static_cast<int64_t>((b >> (16 * i)) & 0xffff);
    }
    // Each 16-bit uniform u has mean 32767.5 and variance (65536^2 - 1) / 12.
    constexpr double kMean = 8 * 32767.5;
    constexpr double kInvSd = 1.0 / 53509.91992145008;  // 1 / sqrt(8 * (65536^2 - 1) / 12)
    return static_cast<float>((static_cast<double>(sum) - kMean) * kInvSd);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_[4];
};

}  // namespace minfer::synth
