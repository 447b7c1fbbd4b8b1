// Bit placement helpers shared by the K-quant dequantizers and quantizers, and
// by the CPU dot-product kernels, so that reading and writing a field is
// defined in exactly one place. See quant/blocks.h for the layouts these
// implement. No state.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace minfer::quant::detail {

// Q2_K/Q3_K low bits and Q6_K high bits: 2-bit field of element e (0..255).
inline int get_2bit(const uint8_t* q, int e) {
  const int r = e % 128;
  return (q[32 * (e / 128) + r % 32] >> (2 * (r / 32))) & 3;
}
inline void set_2bit(uint8_t* q, int e, int v) {
  const int r = e % 128;
  q[32 * (e / 128) + r % 32] |= static_cast<uint8_t>((v & 3) << (2 * (r / 32)));
}

// Q3_K hmask and Q5_K qh: one bit of element e, in byte e % 32, bit e / 32.
inline int get_hbit(const uint8_t* h, int e) {
  return (h[e % 32] >> (e / 32)) & 1;
}
inline void set_hbit(uint8_t* h, int e, int v) {
  h[e % 32] |= static_cast<uint8_t>((v & 1) << (e / 32));
}

// Q4_K/Q5_K low nibble of element e: sub-block pairs share 32 bytes.
inline int get_k4(const uint8_t* qs, int e) {
  const int j = e / 32;
  return (qs[32 * (j / 2) + e % 32] >> (4 * (j % 2))) & 0x0f;
}
inline void set_k4(uint8_t* qs, int e, int v) {
  const int j = e / 32;
  qs[32 * (j / 2) + e % 32] |= static_cast<uint8_t>((v & 0x0f) << (4 * (j % 2)));
}

// Q6_K low nibble of element e.
inline int get_q6_low(const uint8_t* ql, int e) {
  const int r = e % 128;
  return (ql[64 * (e / 128) + r % 64] >> (4 * (r / 64))) & 0x0f;
}
inline void set_q6_low(uint8_t* ql, int e, int v) {
  const int r = e % 128;
  ql[64 * (e / 128) + r % 64] |= static_cast<uint8_t>((v & 0x0f) << (4 * (r / 64)));
}

// Q3_K's sixteen 6-bit scales (stored biased by 32).
inline int get_q3_scale(const uint8_t* s, int j) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0x0f;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return lo | (hi << 4);
}
inline void set_q3_scale(uint8_t* s, int j, int v) {
  s[j % 8] |= static_cast<uint8_t>((v & 0x0f) << (4 * (j / 8)));
  s[8 + j % 4] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (j / 4)));
}

// Q4_K/Q5_K's eight 6-bit (scale, min) pairs.
inline void get_k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
inline void set_k4_scale_min(uint8_t* s, int j, int sc, int m) {
  if (j < 4) {
    s[j] |= static_cast<uint8_t>(sc & 63);
    s[j + 4] |= static_cast<uint8_t>(m & 63);
  } else {
    s[j + 4] |= static_cast<uint8_t>((sc & 0x0f) | ((m & 0x0f) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

}  // namespace minfer::quant::detail
