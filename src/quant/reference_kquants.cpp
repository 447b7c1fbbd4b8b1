// K-quant dequantization (Q2_K..Q6_K, Q8_K) and the Q8_K activation
// quantizer. Each dequantizer evaluates ggml's expression in ggml's order --
// (d * sub_scale) * q - (dmin * sub_min) -- so the result is bit-exact.
#include <cmath>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/kquant_layout.h"
#include "quant/reference_internal.h"

// See reference_legacy.cpp: a*b-c must not become an FMA.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::quant::detail {

void dequantize_q2_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / 16;
      const float dl = d * static_cast<float>(b.scales[j] & 0x0f);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      dst[e] = dl * static_cast<float>(get_2bit(b.qs, e)) - ml;
    }
  }
}

void dequantize_q3_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int e = 0; e < kQK_K; ++e) {
      const float dl = d * static_cast<float>(get_q3_scale(b.scales, e / 16) - 32);
      // A clear high bit means the value is 4 lower: q spans [-4, 3].
      const int q = get_2bit(b.qs, e) - (get_hbit(b.hmask, e) ? 0 : 4);
      dst[e] = dl * static_cast<float>(q);
    }
  }
}

void dequantize_q4_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      int sc = 0;
      int m = 0;
      get_k4_scale_min(b.scales, e / 32, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      dst[e] = dl * static_cast<float>(get_k4(b.qs, e)) - ml;
    }
  }
}

void dequantize_q5_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      int sc = 0;
      int m = 0;
      get_k4_scale_min(b.scales, e / 32, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const int q = get_k4(b.qs, e) | (get_hbit(b.qh, e) << 4);
      dst[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_q6_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int e = 0; e < kQK_K; ++e) {
      const float dl = d * static_cast<float>(b.scales[e / 16]);
      const int q = (get_q6_low(b.ql, e) | (get_2bit(b.qh, e) << 4)) - 32;
      dst[e] = dl * static_cast<float>(q);
    }
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
    const auto b = load_block<BlockQ8_K>(src, i);
    for (int e = 0; e < kQK_K; ++e) dst[e] = b.d * static_cast<float>(b.qs[e]);
  }
}

// ggml's activation quantizer: the first element of largest magnitude maps to
// exactly -127 (iscale is signed), everything else rounds half to even; the
// opposite extreme can land on +127.
void quantize_q8_k(const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += kQK_K) {
    BlockQ8_K b{};
    float amax = 0.0f;
    float max = 0.0f;
    for (int e = 0; e < kQK_K; ++e) {
      if (std::fabs(src[e]) > amax) {
        amax = std::fabs(src[e]);
        max = src[e];
      }
    }
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      for (int e = 0; e < kQK_K; ++e) {
        // A subnormal extreme makes iscale infinite: its zeros give 0 * inf, a
        // NaN, and its other elements +-inf. All become -128, what ggml's
        // rounding and clamp yield for them (and never an undefined conversion).
        const float p = iscale * src[e];
        b.qs[e] = !std::isfinite(p) ? int8_t{-128}
                                    : static_cast<int8_t>(clamp_int(round_half_even(p), -128, 127));
      }
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int e = 0; e < 16; ++e) sum += b.qs[16 * g + e];
        b.bsums[g] = static_cast<int16_t>(sum);
      }
      b.d = 1.0f / iscale;
    }
    store_block(dst, i, b);
  }
}

}  // namespace minfer::quant::detail
