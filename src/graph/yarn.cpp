#include "graph/yarn.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace minfer::graph {
namespace {

// The dimension whose wavelength fits `n_rot_beta` rotations into the
// original context: below it frequencies keep their trained values.
float corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot_beta, float base) {
  const float two_pi = 2.0f * std::numbers::pi_v<float>;
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot_beta * two_pi)) / (2.0f * std::log(base));
}

// llama.cpp's context first computes the magnitude scale it wants and then
// divides out the one its kernel re-applies; doing the same float steps
// keeps our final scale on the same bits.
float attn_factor_for(const YarnConfig& c) {
  const float factor = 1.0f / c.freq_scale;
  float a = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
  a *= 1.0f / (1.0f + 0.1f * std::log(factor));
  return a * c.attn_factor;
}

}  // namespace

void apply_yarn(const YarnConfig& c, RopeMeta& rope) {
  rope.ext_factor = c.ext_factor;
  if (c.ext_factor == 0.0f) {
    rope.corr_low = rope.corr_high = 0.0f;
    rope.mscale = 1.0f;
    return;
  }
  const float low = std::floor(corr_dim(c.n_rot, c.n_ctx_orig, c.beta_fast, c.freq_base));
  const float high = std::ceil(corr_dim(c.n_rot, c.n_ctx_orig, c.beta_slow, c.freq_base));
  rope.corr_low = std::max(0.0f, low);
  rope.corr_high = std::min(static_cast<float>(c.n_rot - 1), high);
  rope.mscale = attn_factor_for(c) * (1.0f + 0.1f * std::log(1.0f / c.freq_scale));
}

}  // namespace minfer::graph
