#include "backend/cpu/ops.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/norm_rope.h"
#include "backend/cpu/vec_math.h"
#include "quant/half.h"

// ggml's expressions are evaluated unfused; keep the compiler from contracting.
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace minfer::cpu {
namespace {

// Constants of ggml's tanh-approximated GELU.
constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

float gelu_exact_f32(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}

// GELU of every f16 value, rounded to f16: ggml's CPU evaluates GELU through
// this table, so matching its results needs the same double rounding.
const std::array<uint16_t, 65536>& gelu_table() {
  static const auto* table = [] {
    auto* t = new std::array<uint16_t, 65536>();
    for (uint32_t i = 0; i < 65536; ++i) {
      (*t)[i] = quant::f32_to_f16(gelu_exact_f32(quant::f16_to_f32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return *table;
}

inline float gelu_one(float x, const std::array<uint16_t, 65536>& table) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return quant::f16_to_f32(table[quant::f32_to_f16(x)]);
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
              float* y) {
  const Isa isa = active_isa();
  for (int64_t r = 0; r < n_rows; ++r) {
    detail::rms_norm_row_f32(x + r * dim, weight, dim, eps, y + r * dim, isa);
  }
}

void rms_norm_heads(const float* x, const float* weight, int64_t n_tokens, int64_t n_heads,
                    int64_t head_dim, float eps, float* y) {
  rms_norm(x, weight, n_tokens * n_heads, head_dim, eps, y);
}

Status rope(const float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
            const int32_t* positions, float freq_base, float freq_scale, const float* freq_factors,
            RopeMode mode, float* y, const RopeYarn& yarn) {
  if (n_tokens < 0 || n_heads < 0 || head_dim < 0) {
    return Status::internal("rope: negative size (n_tokens " + std::to_string(n_tokens) +
                            ", n_heads " + std::to_string(n_heads) + ", head_dim " +
                            std::to_string(head_dim) + ")");
  }
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim) {
    return Status::internal("rope: n_rot " + std::to_string(n_rot) +
                            " must be positive, even and at most head_dim " +
                            std::to_string(head_dim));
  }
  if (!(freq_base > 0.0f)) {
    return Status::internal("rope: freq_base " + std::to_string(freq_base) + " must be positive");
  }
  if (n_tokens * n_heads > 0 && (x == nullptr || y == nullptr || positions == nullptr)) {
    return Status::internal("rope: null buffer");
  }
  const Isa isa = active_isa();
  std::vector<float> cache(static_cast<size_t>(n_rot));  // cos[n_rot/2], then sin[n_rot/2]
  float* cos_v = cache.data();
  float* sin_v = cache.data() + n_rot / 2;
  const int64_t row = n_heads * head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    detail::rope_cache_f32(static_cast<float>(positions[t]), n_rot, freq_base, freq_scale,
                           freq_factors, cos_v, sin_v, yarn);
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t off = t * row + h * head_dim;
      detail::rope_rotate_f32(x + off, head_dim, n_rot, mode, cos_v, sin_v, y + off, isa);
    }
  }
  return Status::ok();
}

void silu(const float* x, int64_t n, float* y) {
  detail::silu_f32(x, n, y, active_isa());
}

void gelu(const float* x, int64_t n, float* y) {
  const auto& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_one(x[i], table);
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  detail::swiglu_f32(gate, up, n, out, active_isa());
}

void geglu(const float* gate, const float* up, int64_t n, float* out) {
  const auto& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) {
    // ggml passes large inputs through unchanged, so x >= 10 gives x * up.
    out[i] = gelu_one(gate[i], table) * up[i];
  }
}

void swiglu_oai(const float* gate, const float* up, int64_t n, float alpha, float limit,
                float* out) {
  for (int64_t i = 0; i < n; ++i) {
    // Comparisons written so that a NaN passes through, as ggml's std::min
    // and std::clamp do (fminf/fmaxf would replace it by the limit).
    const float g = gate[i];
    const float u = up[i];
    const float x = limit < g ? limit : g;
    const float y = u < -limit ? -limit : (limit < u ? limit : u);
    const float glu = x / (1.0f + std::exp(alpha * (-x)));
    out[i] = glu * (y + 1.0f);
  }
}

void add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* x, int64_t n, float s, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

void softmax(const float* x, int64_t n_rows, int64_t n, float scale_factor, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      yr[i] = xr[i] * scale_factor;
      max = std::fmax(max, yr[i]);
    }
    const double sum = detail::softmax_exp_f32(yr, n, max, yr, active_isa());
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
  }
}

}  // namespace minfer::cpu
