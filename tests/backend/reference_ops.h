// Double-precision references of the graph ops, written from the contracts in
// graph/ir.h and backend/cpu/ops.h rather than from any kernel: the CPU tests
// (ops_test, attention_test, moe_test) and the op-conformance test check the
// CPU backend against them, and the other backends are checked against the
// CPU. Each takes the values its op reads as the op sees them (decoded
// weights, cache rows as stored) and computes in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "backend/cpu/ops.h"
#include "graph/ir.h"

namespace minfer::cpu::testing {

inline double silu_ref(double x) {
  return x / (1.0 + std::exp(-x));
}

// The tanh approximation of GELU.
inline double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x)));
}

// gpt-oss's clamped GLU (graph::GluMeta): x = min(gate, limit), y =
// clamp(up, -limit, limit), x * sigmoid(alpha * x) * (y + 1).
inline double swiglu_oai_ref(double gate, double up, double alpha, double limit) {
  const double x = std::min(gate, limit);
  const double y = std::clamp(up, -limit, limit);
  return x / (1.0 + std::exp(-alpha * x)) * (y + 1.0);
}

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w over rows of `dim`, or over each
// chunk of `group` elements when group > 0 (w then has `group` elements; null: none).
inline std::vector<double> rms_norm_ref(const float* x, const float* w, int64_t rows, int64_t dim,
                                        double eps, int64_t group = 0) {
  const int64_t len = group > 0 ? group : dim;
  std::vector<double> y(static_cast<size_t>(rows * dim));
  for (int64_t c = 0; c < rows * dim / len; ++c) {
    const float* xc = x + c * len;
    double ss = 0.0;
    for (int64_t i = 0; i < len; ++i) ss += double(xc[i]) * xc[i];
    const double s = 1.0 / std::sqrt(ss / double(len) + eps);
    for (int64_t i = 0; i < len; ++i) y[c * len + i] = xc[i] * s * (w ? w[i] : 1.0);
  }
  return y;
}

// y[t][o] = sum_i w[o][i] * x[t][i] (+ bias[o]): w [out][in] as decoded floats.
inline std::vector<double> matmul_ref(const float* w, const float* x, const float* bias, int64_t in,
                                      int64_t out, int64_t tokens) {
  std::vector<double> y(static_cast<size_t>(out * tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) sum += double(w[o * in + i]) * x[t * in + i];
      y[t * out + o] = sum;
    }
  }
  return y;
}

// Each row's first largest element; NaN never chosen; -1 when the row holds
// only -inf and NaN.
inline std::vector<int32_t> argmax_ref(const float* x, int64_t rows, int64_t width) {
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t best = -1;
    for (int64_t i = 0; i < width; ++i) {
      const float v = x[r * width + i];
      if (std::isnan(v) || v == -std::numeric_limits<float>::infinity()) continue;
      if (best < 0 || v > x[r * width + best]) best = static_cast<int32_t>(i);
    }
    ids.push_back(best);
  }
  return ids;
}

// RoPE of one head; pair i turns by theta_i = pos * base^(-2i/n_rot) / ff[i]
// times fs, or with YaRN (yarn.ext_factor != 0) by the blend of that angle
// and the unscaled one, cos and sin then times yarn.mscale (backend/cpu/ops.h).
inline std::vector<double> rope_ref(const float* x, int64_t hd, int64_t n_rot, int32_t pos,
                                    float base, float fs, const float* ff, RopeMode mode,
                                    const RopeYarn& yarn = {}) {
  std::vector<double> y(x, x + hd);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double extrap = pos * std::pow(double(base), -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
    double theta = extrap * fs, mscale = 1.0;
    if (yarn.ext_factor != 0.0f) {
      const double span = std::max(0.001, double(yarn.corr_high) - yarn.corr_low);
      const double ramp = 1.0 - std::clamp((double(i) - yarn.corr_low) / span, 0.0, 1.0);
      const double mix = ramp * yarn.ext_factor;
      theta = theta * (1.0 - mix) + extrap * mix;
      mscale = yarn.mscale;
    }
    const double c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
    const int64_t i0 = mode == RopeMode::kNormal ? 2 * i : i;
    const int64_t i1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + n_rot / 2;
    y[i0] = x[i0] * c - x[i1] * s;
    y[i1] = x[i0] * s + x[i1] * c;
  }
  return y;
}

// Causal softmax attention: q [n_tokens][n_head * head_dim], k and v
// [n_kv][n_head_kv * head_dim] by position (paging is the caller's to
// resolve), with the shape's sliding window and sinks (one logit per head
// in the denominator only).
inline std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<float>& k,
                                         const std::vector<float>& v,
                                         const std::vector<int32_t>& pos, const AttentionShape& s) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  std::vector<double> out(q.size(), 0.0);
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t kvh = h / group;
      std::vector<std::pair<int64_t, double>> scores;
      for (int64_t j = 0; j < s.n_kv; ++j) {
        if (j > pos[t] || (s.sliding_window > 0 && pos[t] - j >= s.sliding_window)) continue;
        double dot = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          dot += double(q[(t * s.n_head + h) * d + i]) * k[(j * s.n_head_kv + kvh) * d + i];
        }
        scores.emplace_back(j, dot * s.scale);
      }
      double mx = s.sinks ? double(s.sinks[h]) : -INFINITY, sum = 0.0;
      for (auto& [j, sc] : scores) mx = std::max(mx, sc);
      for (auto& [j, sc] : scores) sum += std::exp(sc - mx);
      if (s.sinks) sum += std::exp(double(s.sinks[h]) - mx);
      for (auto& [j, sc] : scores) {
        const double p = std::exp(sc - mx) / sum;
        for (int64_t i = 0; i < d; ++i) {
          out[(t * s.n_head + h) * d + i] += p * v[(j * s.n_head_kv + kvh) * d + i];
        }
      }
    }
  }
  return out;
}

inline std::vector<double> softmax_ref(const float* x, int64_t n) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(x[i]));
  std::vector<double> p(static_cast<size_t>(n));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += p[i] = std::exp(static_cast<double>(x[i]) - max);
  for (double& v : p) v /= sum;
  return p;
}

// Each token's n_used best experts (stable: equal scores keep id order).
inline std::vector<int32_t> topk_ref(const std::vector<float>& logits, int64_t n_tokens,
                                     int64_t n_expert, int64_t n_used, graph::MoeGating gating) {
  std::vector<int32_t> out;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits.data() + t * n_expert;
    std::vector<double> score(row, row + n_expert);
    if (gating != graph::MoeGating::kTopKSoftmax) score = softmax_ref(row, n_expert);
    std::vector<int32_t> ids(static_cast<size_t>(n_expert));
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    out.insert(out.end(), ids.begin(), ids.begin() + n_used);
  }
  return out;
}

// The gating weights of the experts `ids` picked for each token.
inline std::vector<double> weights_ref(const std::vector<float>& logits,
                                       const std::vector<int32_t>& ids, int64_t n_tokens,
                                       int64_t n_expert, int64_t n_used, graph::MoeGating gating) {
  std::vector<double> out;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits.data() + t * n_expert;
    std::vector<float> picked;
    for (int64_t j = 0; j < n_used; ++j) picked.push_back(row[ids[t * n_used + j]]);
    std::vector<double> w;
    if (gating == graph::MoeGating::kTopKSoftmax) {
      w = softmax_ref(picked.data(), n_used);
    } else {
      const std::vector<double> p = softmax_ref(row, n_expert);
      for (int64_t j = 0; j < n_used; ++j) w.push_back(p[ids[t * n_used + j]]);
      if (gating == graph::MoeGating::kSoftmaxNormalized) {
        const double sum = std::accumulate(w.begin(), w.end(), 0.0);
        for (double& v : w) v /= sum;
      }
    }
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

}  // namespace minfer::cpu::testing
