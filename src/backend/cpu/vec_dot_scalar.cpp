// Scalar dot kernels: ggml's generic C code, operation for operation, so that
// the result matches a ggml build without SIMD bit for bit. That includes the
// float evaluation order of each scale product and, for the K-quants, the
// eight-way split of the integer sums (aux32[l] collects elements l mod 8) and
// the per-lane float accumulators that ggml keeps across super-blocks.
#include <cstring>

#include "backend/cpu/vec_dot_internal.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"

// A fused multiply-add would round differently from ggml's generic build.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::cpu::detail {
namespace {

using quant::bf16_to_f32;
using quant::f16_to_f32;
using quant::kQK;
using quant::kQK_K;

// Integer sums of the K-quant kernels: aux32[l] += scale * q8[i] * a[i] for
// the i = l (mod 8) of each group of `group` elements sharing a scale.
void accumulate_groups(const int8_t* a, const int8_t* q8, const int* scales, int group,
                       int32_t aux32[8]) {
  for (int i = 0; i < kQK_K; i += 8) {
    const int scale = scales[i / group];
    for (int l = 0; l < 8; ++l) {
      const int16_t prod = static_cast<int16_t>(q8[i + l] * a[i + l]);
      aux32[l] += scale * prod;
    }
  }
}

// Q4_K and Q5_K share everything but the fifth bit; `qh` is null for Q4_K.
float k4_block_dot(const uint8_t* qs, const uint8_t* qh, const uint8_t* packed_scales, float d,
                   float dmin, const quant::BlockQ8_K& y, float sums[8]) {
  int8_t a[kQK_K];
  for (int e = 0; e < kQK_K; ++e) {
    const int j = e / 32;
    int q = (qs[32 * (j / 2) + e % 32] >> (4 * (j % 2))) & 0x0f;
    if (qh != nullptr) q += ((qh[e % 32] >> j) & 1) ? 16 : 0;
    a[e] = static_cast<int8_t>(q);
  }
  int scales[8];
  int mins[8];
  for (int j = 0; j < 8; ++j)
    quant::detail::get_k4_scale_min(packed_scales, j, &scales[j], &mins[j]);
  int sumi = 0;
  for (int j = 0; j < kQK_K / 16; ++j) sumi += y.bsums[j] * mins[j / 2];
  int32_t aux32[8] = {};
  accumulate_groups(a, y.qs, scales, 32, aux32);
  const float dd = d * y.d;
  for (int l = 0; l < 8; ++l) sums[l] += dd * static_cast<float>(aux32[l]);
  return dmin * y.d * static_cast<float>(sumi);
}

}  // namespace

float dot_f32_scalar(int64_t n, const void* w, const void* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(load_block<float>(w, i) * load_block<float>(x, i));
  }
  return static_cast<float>(sum);
}

float dot_f16_scalar(int64_t n, const void* w, const void* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(f16_to_f32(load_block<uint16_t>(w, i)) *
                               f16_to_f32(load_block<uint16_t>(x, i)));
  }
  return static_cast<float>(sum);
}

float dot_bf16_scalar(int64_t n, const void* w, const void* x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(bf16_to_f32(load_block<uint16_t>(w, i)) *
                               bf16_to_f32(load_block<uint16_t>(x, i)));
  }
  return static_cast<float>(sum);
}

float dot_q4_0_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockQ4_0>(w, ib);
    const auto bx = load_block<quant::BlockQ8_0>(x, ib);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi0 += ((bw.qs[j] & 0x0f) - 8) * bx.qs[j];
      sumi1 += ((bw.qs[j] >> 4) - 8) * bx.qs[j + kQK / 2];
    }
    sumf += static_cast<float>(sumi0 + sumi1) * f16_to_f32(bw.d) * f16_to_f32(bx.d);
  }
  return sumf;
}

float dot_q4_1_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockQ4_1>(w, ib);
    const auto bx = load_block<quant::BlockQ8_1>(x, ib);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi0 += (bw.qs[j] & 0x0f) * bx.qs[j];
      sumi1 += (bw.qs[j] >> 4) * bx.qs[j + kQK / 2];
    }
    sumf += (f16_to_f32(bw.d) * f16_to_f32(bx.d)) * static_cast<float>(sumi0 + sumi1) +
            f16_to_f32(bw.m) * f16_to_f32(bx.s);
  }
  return sumf;
}

float dot_q5_0_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockQ5_0>(w, ib);
    const auto bx = load_block<quant::BlockQ8_0>(x, ib);
    uint32_t qh;
    std::memcpy(&qh, bw.qh, sizeof(qh));
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = ((bw.qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
      const int x1 = ((bw.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      sumi0 += x0 * bx.qs[j];
      sumi1 += x1 * bx.qs[j + kQK / 2];
    }
    sumf += (f16_to_f32(bw.d) * f16_to_f32(bx.d)) * static_cast<float>(sumi0 + sumi1);
  }
  return sumf;
}

float dot_q5_1_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockQ5_1>(w, ib);
    const auto bx = load_block<quant::BlockQ8_1>(x, ib);
    uint32_t qh;
    std::memcpy(&qh, bw.qh, sizeof(qh));
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (bw.qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
      const int x1 = (bw.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      sumi0 += x0 * bx.qs[j];
      sumi1 += x1 * bx.qs[j + kQK / 2];
    }
    sumf += (f16_to_f32(bw.d) * f16_to_f32(bx.d)) * static_cast<float>(sumi0 + sumi1) +
            f16_to_f32(bw.m) * f16_to_f32(bx.s);
  }
  return sumf;
}

float dot_q8_0_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockQ8_0>(w, ib);
    const auto bx = load_block<quant::BlockQ8_0>(x, ib);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += bw.qs[j] * bx.qs[j];
    sumf += static_cast<float>(sumi) * (f16_to_f32(bw.d) * f16_to_f32(bx.d));
  }
  return sumf;
}

// ggml's ggml_vec_dot_mxfp4_q8_0_generic: the doubled E2M1 values against
// the Q8_0 quants, scaled by f16(d_x) * (half the E8M0 scale) in that order.
float dot_mxfp4_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t ib = 0; ib < n / kQK; ++ib) {
    const auto bw = load_block<quant::BlockMxfp4>(w, ib);
    const auto bx = load_block<quant::BlockQ8_0>(x, ib);
    const float d = f16_to_f32(bx.d) * quant::mxfp4_half_scale(bw.e);
    int sumi1 = 0;
    int sumi2 = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi1 += bx.qs[j] * quant::kMxfp4Values[bw.qs[j] & 0x0f];
      sumi2 += bx.qs[j + kQK / 2] * quant::kMxfp4Values[bw.qs[j] >> 4];
    }
    sumf += d * static_cast<float>(sumi1 + sumi2);
  }
  return sumf;
}

float dot_q2_k_scalar(int64_t n, const void* w, const void* x) {
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto bw = load_block<quant::BlockQ2_K>(w, i);
    const auto by = load_block<quant::BlockQ8_K>(x, i);
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += by.bsums[j] * (bw.scales[j] >> 4);
    const float dall = by.d * f16_to_f32(bw.d);
    const float dmin = by.d * f16_to_f32(bw.dmin);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {  // 16 groups of 16 elements, one scale each
      const int h = g / 8;
      const int shift = 2 * ((g % 8) / 2);
      const int base = 16 * (g % 2);
      int isuml = 0;
      for (int l = 0; l < 16; ++l) {
        isuml += by.qs[16 * g + l] * ((bw.qs[32 * h + base + l] >> shift) & 3);
      }
      isum += (bw.scales[g] & 0x0f) * isuml;
    }
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

float dot_q3_k_scalar(int64_t n, const void* w, const void* x) {
  float sums[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto bw = load_block<quant::BlockQ3_K>(w, i);
    const auto by = load_block<quant::BlockQ8_K>(x, i);
    int8_t a[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      const int r = e % 128;
      const int lo = (bw.qs[32 * (e / 128) + r % 32] >> (2 * (r / 32))) & 3;
      const int hi = (bw.hmask[e % 32] >> (e / 32)) & 1;
      a[e] = static_cast<int8_t>(lo - (hi ? 0 : 4));
    }
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = (bw.scales[j % 8] >> (4 * (j / 8))) & 0x0f;
      const int hi = (bw.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (lo | (hi << 4)) - 32;
    }
    int32_t aux32[8] = {};
    accumulate_groups(a, by.qs, scales, 16, aux32);
    const float d = f16_to_f32(bw.d) * by.d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float dot_q4_k_scalar(int64_t n, const void* w, const void* x) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto bw = load_block<quant::BlockQ4_K>(w, i);
    const auto by = load_block<quant::BlockQ8_K>(x, i);
    sumf -=
        k4_block_dot(bw.qs, nullptr, bw.scales, f16_to_f32(bw.d), f16_to_f32(bw.dmin), by, sums);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float dot_q5_k_scalar(int64_t n, const void* w, const void* x) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto bw = load_block<quant::BlockQ5_K>(w, i);
    const auto by = load_block<quant::BlockQ8_K>(x, i);
    sumf -= k4_block_dot(bw.qs, bw.qh, bw.scales, f16_to_f32(bw.d), f16_to_f32(bw.dmin), by, sums);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float dot_q6_k_scalar(int64_t n, const void* w, const void* x) {
  float sums[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto bw = load_block<quant::BlockQ6_K>(w, i);
    const auto by = load_block<quant::BlockQ8_K>(x, i);
    int8_t a[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128;
      const int r = e % 128;
      const int lo = (bw.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int hi = (bw.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      a[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    int scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = bw.scales[j];
    int32_t aux32[8] = {};
    accumulate_groups(a, by.qs, scales, 16, aux32);
    const float d = f16_to_f32(bw.d) * by.d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

}  // namespace minfer::cpu::detail
