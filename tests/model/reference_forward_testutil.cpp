#include "model/reference_forward_testutil.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "quant/reference.h"

namespace minfer::model::testing {
namespace {

// ---------------------------------------------------------------------------
// Loading: every tensor dequantized to f32, row by row.

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// `dims` in GGUF order: dims[0] is the row length.
Result<std::vector<float>> dequantize(const Weights& weights, const std::string& name,
                                      const std::vector<int64_t>& dims) {
  MINFER_ASSIGN_OR_RETURN(const WeightView* t, weights.require(name));
  if (t->dims != dims) {
    return Status::error("tensor '" + name + "' has shape " + dims_str(t->dims) + ", expected " +
                         dims_str(dims));
  }
  const int64_t cols = t->row_length();
  std::vector<float> out(static_cast<size_t>(cols * t->rows()));
  for (int64_t r = 0; r < t->rows(); ++r) {
    MINFER_RETURN_IF_ERROR(
        quant::dequantize_row(t->type, t->data + r * t->row_bytes(), out.data() + r * cols, cols)
            .with_context("tensor '" + name + "'"));
  }
  return out;
}

Result<ReferenceLayer> load_layer(const Weights& wt, const HParams& hp, int il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t d = hp.n_embd, q = hp.q_dim(), kv = hp.kv_dim(), ff = hp.n_ff;
  ReferenceLayer l;
  MINFER_ASSIGN_OR_RETURN(l.attn_norm, dequantize(wt, b + "attn_norm.weight", {d}));
  MINFER_ASSIGN_OR_RETURN(l.wq, dequantize(wt, b + "attn_q.weight", {d, q}));
  MINFER_ASSIGN_OR_RETURN(l.wk, dequantize(wt, b + "attn_k.weight", {d, kv}));
  MINFER_ASSIGN_OR_RETURN(l.wv, dequantize(wt, b + "attn_v.weight", {d, kv}));
  if (hp.qkv_bias) {
    MINFER_ASSIGN_OR_RETURN(l.bq, dequantize(wt, b + "attn_q.bias", {q}));
    MINFER_ASSIGN_OR_RETURN(l.bk, dequantize(wt, b + "attn_k.bias", {kv}));
    MINFER_ASSIGN_OR_RETURN(l.bv, dequantize(wt, b + "attn_v.bias", {kv}));
  }
  if (hp.qk_norm) {
    MINFER_ASSIGN_OR_RETURN(l.q_norm, dequantize(wt, b + "attn_q_norm.weight", {hp.head_dim}));
    MINFER_ASSIGN_OR_RETURN(l.k_norm, dequantize(wt, b + "attn_k_norm.weight", {hp.head_dim}));
  }
  MINFER_ASSIGN_OR_RETURN(l.wo, dequantize(wt, b + "attn_output.weight", {q, d}));
  MINFER_ASSIGN_OR_RETURN(l.ffn_norm, dequantize(wt, b + hp.ffn_norm_name + ".weight", {d}));
  if (hp.attn_output_bias) {
    MINFER_ASSIGN_OR_RETURN(l.bo, dequantize(wt, b + "attn_output.bias", {d}));
  }
  if (hp.attn_sinks) {
    MINFER_ASSIGN_OR_RETURN(l.sinks, dequantize(wt, b + "attn_sinks.weight", {hp.n_head}));
  }
  if (hp.moe_biases) {
    const int64_t fe = hp.n_ff_exp, ne = hp.n_expert;
    MINFER_ASSIGN_OR_RETURN(l.router_bias, dequantize(wt, b + "ffn_gate_inp.bias", {ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_gate_bias, dequantize(wt, b + "ffn_gate_exps.bias", {fe, ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_up_bias, dequantize(wt, b + "ffn_up_exps.bias", {fe, ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_down_bias, dequantize(wt, b + "ffn_down_exps.bias", {d, ne}));
  }
  if (hp.is_moe()) {
    const int64_t fe = hp.n_ff_exp, ne = hp.n_expert;
    MINFER_ASSIGN_OR_RETURN(l.router, dequantize(wt, b + "ffn_gate_inp.weight", {d, ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_gate, dequantize(wt, b + "ffn_gate_exps.weight", {d, fe, ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_up, dequantize(wt, b + "ffn_up_exps.weight", {d, fe, ne}));
    MINFER_ASSIGN_OR_RETURN(l.exp_down, dequantize(wt, b + "ffn_down_exps.weight", {fe, d, ne}));
  } else {
    MINFER_ASSIGN_OR_RETURN(l.w_gate, dequantize(wt, b + "ffn_gate.weight", {d, ff}));
    MINFER_ASSIGN_OR_RETURN(l.w_up, dequantize(wt, b + "ffn_up.weight", {d, ff}));
    MINFER_ASSIGN_OR_RETURN(l.w_down, dequantize(wt, b + "ffn_down.weight", {ff, d}));
  }
  if (hp.gemma) {
    MINFER_ASSIGN_OR_RETURN(l.post_attn_norm,
                            dequantize(wt, b + "post_attention_norm.weight", {d}));
    MINFER_ASSIGN_OR_RETURN(l.post_ffn_norm, dequantize(wt, b + "post_ffw_norm.weight", {d}));
  }
  return l;
}

// ---------------------------------------------------------------------------
// The building blocks. Activations are row-major [n_tokens][features].

// y = W x for every token: x [n][in], w [out][in] -> [n][out].
std::vector<float> matmul(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                          int64_t in, int64_t out) {
  std::vector<float> y(static_cast<size_t>(n * out));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < out; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < in; ++c) sum += double(w[r * in + c]) * double(x[t * in + c]);
      y[t * out + r] = static_cast<float>(sum);
    }
  }
  return y;
}

// x [rows][dim] += bias [dim].
void add_bias(std::vector<float>& x, const std::vector<float>& bias, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) x[r * dim + i] += bias[i];
  }
}

// x [rows][dim] in place: x / sqrt(mean(x^2) + eps) * weight [dim]. Per-head
// norms pass rows = n_tokens * n_heads and dim = head_dim.
void rms_norm(std::vector<float>& x, const std::vector<float>& weight, int64_t rows, int64_t dim,
              float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x.data() + r * dim;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += double(v[i]) * double(v[i]);
    const double scale = 1.0 / std::sqrt(sum_sq / double(dim) + double(eps));
    for (int64_t i = 0; i < dim; ++i) v[i] = static_cast<float>(v[i] * scale * weight[i]);
  }
}

// YaRN (rope scaling "yarn"): pair i keeps its trained angle below the
// low correction dimension, is interpolated by freq_scale from the high one,
// blends linearly between; every rotation is scaled by 1 + 0.1 ln(1/freq_scale)
// (times the file's attn_factor). The dimension that fits `beta` turns into
// the original context: n_rot ln(n_ctx_orig / (2 pi beta)) / (2 ln base).
struct Yarn {
  bool on = false;
  double low = 0, high = 0, mscale = 1;
};

Yarn yarn_of(const HParams& hp, int il) {
  Yarn y;
  if (hp.rope_scaling != RopeScaling::kYarn) return y;
  const double base = hp.layer_rope_base(il), scale = hp.layer_rope_scale(il);
  auto dim = [&](double beta) {
    return double(hp.n_rot) *
           std::log(double(hp.n_ctx_orig_yarn) / (2.0 * std::numbers::pi * beta)) /
           (2.0 * std::log(base));
  };
  y.on = true;
  y.low = std::max(0.0, std::floor(dim(hp.yarn_beta_fast)));
  y.high = std::min(double(hp.n_rot - 1), std::ceil(dim(hp.yarn_beta_slow)));
  y.mscale = (1.0 + 0.1 * std::log(1.0 / scale)) * hp.rope_attn_factor;
  return y;
}

// Rotates x [n][n_heads][head_dim] in place; the token at row t sits at
// position t. Pair i (i < n_rot/2) turns by theta = pos * scale * base^(-2i/n_rot)
// / freq_factor[i] (YaRN: blended as yarn_of says). NeoX pairs (x[i],
// x[i + n_rot/2]); normal pairs (x[2i], x[2i+1]).
void rope(std::vector<float>& x, int64_t n, int64_t n_heads, const ReferenceWeights& w, int il) {
  const HParams& hp = w.hp;
  const double base = hp.layer_rope_base(il), freq_scale = hp.layer_rope_scale(il);
  const Yarn yarn = yarn_of(hp, il);
  const int64_t half = hp.n_rot / 2;
  const bool neox = hp.rope_mode == graph::RopeMode::kNeox;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x.data() + (t * n_heads + h) * hp.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        double extrap = double(t) * std::pow(base, -2.0 * double(i) / double(hp.n_rot));
        if (!w.rope_freqs.empty()) extrap /= w.rope_freqs[i];
        double theta = freq_scale * extrap, mag = 1.0;
        if (yarn.on) {
          const double y = (double(i) - yarn.low) / std::max(0.001, yarn.high - yarn.low);
          const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
          theta = theta * (1.0 - ramp) + extrap * ramp;
          mag = yarn.mscale;
        }
        const int64_t a = neox ? i : 2 * i;
        const int64_t b = neox ? i + half : 2 * i + 1;
        const double x0 = v[a], x1 = v[b], c = std::cos(theta) * mag, s = std::sin(theta) * mag;
        v[a] = static_cast<float>(x0 * c - x1 * s);
        v[b] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}

// Causal GQA attention. q [n][n_head][head_dim], k and v [n][n_head_kv][head_dim]
// -> [n][n_head][head_dim]. Query head h reads kv head h / (n_head / n_head_kv).
// Key j is visible to the query at position p iff j <= p and, with a sliding
// window, p - j < window. A head's sink logit (gpt-oss) joins the softmax's
// denominator only.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, int64_t n, const HParams& hp,
                             int64_t window, const std::vector<float>& sinks) {
  const int64_t hd = hp.head_dim, group = hp.n_head / hp.n_head_kv;
  std::vector<float> out(static_cast<size_t>(n * hp.q_dim()));
  std::vector<double> score(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    for (int64_t h = 0; h < hp.n_head; ++h) {
      const float* qh = q.data() + (p * hp.n_head + h) * hd;
      const int64_t kvh = h / group;
      double max_score = -INFINITY;
      for (int64_t j = first; j <= p; ++j) {
        const float* kj = k.data() + (j * hp.n_head_kv + kvh) * hd;
        double dot = 0.0;
        for (int64_t i = 0; i < hd; ++i) dot += double(qh[i]) * double(kj[i]);
        score[j] = dot * hp.attn_scale;
        max_score = std::max(max_score, score[j]);
      }
      if (!sinks.empty()) max_score = std::max(max_score, double(sinks[h]));
      double sum = sinks.empty() ? 0.0 : std::exp(double(sinks[h]) - max_score);
      for (int64_t j = first; j <= p; ++j) sum += score[j] = std::exp(score[j] - max_score);
      float* oh = out.data() + (p * hp.n_head + h) * hd;
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0.0;
        for (int64_t j = first; j <= p; ++j) acc += score[j] * v[(j * hp.n_head_kv + kvh) * hd + i];
        oh[i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

// gpt-oss's expert activation: gate clamped above, up clamped both ways,
// a sigmoid sharpened by alpha, and up shifted by one.
double swiglu_oai(double gate, double up) {
  constexpr double kAlpha = 1.702, kLimit = 7.0;
  const double x = std::min(gate, kLimit), y = std::clamp(up, -kLimit, kLimit);
  return x / (1.0 + std::exp(-kAlpha * x)) * (y + 1.0);
}

double gelu_tanh(double x) {
  const double sqrt_2_over_pi = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
}

// ---------------------------------------------------------------------------
// One layer: x [n][n_embd] is the residual stream, updated in place.

void attention_block(const ReferenceWeights& w, int il, std::vector<float>& x, int64_t n) {
  const HParams& hp = w.hp;
  const ReferenceLayer& l = w.layers[il];
  std::vector<float> h = x;  // [n][n_embd]
  rms_norm(h, l.attn_norm, n, hp.n_embd, hp.rms_eps);
  std::vector<float> q = matmul(h, l.wq, n, hp.n_embd, hp.q_dim());   // [n][n_head][head_dim]
  std::vector<float> k = matmul(h, l.wk, n, hp.n_embd, hp.kv_dim());  // [n][n_head_kv][head_dim]
  std::vector<float> v = matmul(h, l.wv, n, hp.n_embd, hp.kv_dim());  // [n][n_head_kv][head_dim]
  if (hp.qkv_bias) {
    add_bias(q, l.bq, n, hp.q_dim());
    add_bias(k, l.bk, n, hp.kv_dim());
    add_bias(v, l.bv, n, hp.kv_dim());
  }
  if (hp.qk_norm) {
    rms_norm(q, l.q_norm, n * hp.n_head, hp.head_dim, hp.rms_eps);
    rms_norm(k, l.k_norm, n * hp.n_head_kv, hp.head_dim, hp.rms_eps);
  }
  rope(q, n, hp.n_head, w, il);
  rope(k, n, hp.n_head_kv, w, il);
  const int64_t window = hp.is_swa_layer(il) ? hp.sliding_window : 0;
  std::vector<float> a = attention(q, k, v, n, hp, window, l.sinks);  // [n][q_dim]
  std::vector<float> o = matmul(a, l.wo, n, hp.q_dim(), hp.n_embd);   // [n][n_embd]
  if (!l.bo.empty()) add_bias(o, l.bo, n, hp.n_embd);
  if (hp.gemma) rms_norm(o, l.post_attn_norm, n, hp.n_embd, hp.rms_eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
}

// The experts token t uses and their weights: softmax over the router
// logits, the n_expert_used largest (ties to the lower id), renormalized
// to sum 1 for kSoftmaxNormalized; for kTopKSoftmax the largest logits and
// a softmax over those.
std::vector<std::pair<int64_t, double>> route(const HParams& hp, const std::vector<float>& logits) {
  const int64_t ne = hp.n_expert;
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(static_cast<size_t>(ne));
  double sum = 0;
  for (int64_t e = 0; e < ne; ++e) sum += p[e] = std::exp(double(logits[e]) - mx);
  for (double& v : p) v /= sum;
  std::vector<int64_t> ids(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) ids[e] = e;
  std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  std::vector<std::pair<int64_t, double>> out;
  double total = 0, logit_sum = 0;
  for (int64_t j = 0; j < hp.n_expert_used; ++j) {
    out.push_back({ids[j], p[ids[j]]});
    total += p[ids[j]];
    logit_sum += std::exp(double(logits[ids[j]]) - mx);
  }
  for (auto& [e, wt] : out) {
    if (hp.moe_gating == graph::MoeGating::kSoftmaxNormalized) wt /= total;
    if (hp.moe_gating == graph::MoeGating::kTopKSoftmax)
      wt = std::exp(double(logits[e]) - mx) / logit_sum;
  }
  return out;
}

// One expert's FFN of one token's h [n_embd] -> [n_embd]: SwiGLU, or for
// gpt-oss biased matrices around swiglu_oai.
std::vector<float> expert_ffn(const HParams& hp, const ReferenceLayer& l, int64_t e,
                              const std::vector<float>& ht) {
  const int64_t d = hp.n_embd, fe = hp.n_ff_exp;
  auto slice = [&](const std::vector<float>& all, int64_t size) {
    return std::vector<float>(all.begin() + e * size, all.begin() + (e + 1) * size);
  };
  std::vector<float> gate = matmul(ht, slice(l.exp_gate, fe * d), 1, d, fe);  // [n_ff_exp]
  std::vector<float> up = matmul(ht, slice(l.exp_up, fe * d), 1, d, fe);
  if (hp.moe_biases) {
    add_bias(gate, slice(l.exp_gate_bias, fe), 1, fe);
    add_bias(up, slice(l.exp_up_bias, fe), 1, fe);
  }
  for (int64_t i = 0; i < fe; ++i) {
    gate[i] =
        static_cast<float>(hp.swiglu_oai ? swiglu_oai(gate[i], up[i]) : silu(gate[i]) * up[i]);
  }
  std::vector<float> down = matmul(gate, slice(l.exp_down, d * fe), 1, fe, d);
  if (hp.moe_biases) add_bias(down, slice(l.exp_down_bias, d), 1, d);
  return down;
}

// The mixture-of-experts FFN of h [n][n_embd]: each token's experts'
// outputs, weighted and summed.
std::vector<float> moe_ffn(const HParams& hp, const ReferenceLayer& l, const std::vector<float>& h,
                           int64_t n) {
  const int64_t d = hp.n_embd;
  std::vector<float> logits = matmul(h, l.router, n, d, hp.n_expert);  // [n][n_expert]
  if (!l.router_bias.empty()) add_bias(logits, l.router_bias, n, hp.n_expert);
  std::vector<float> out(static_cast<size_t>(n * d), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<float> ht(h.begin() + t * d, h.begin() + (t + 1) * d);
    const std::vector<float> lt(logits.begin() + t * hp.n_expert,
                                logits.begin() + (t + 1) * hp.n_expert);
    std::vector<double> acc(static_cast<size_t>(d), 0.0);
    for (const auto& [expert, weight] : route(hp, lt)) {
      const std::vector<float> down = expert_ffn(hp, l, expert, ht);
      for (int64_t i = 0; i < d; ++i) acc[i] += weight * down[i];
    }
    for (int64_t i = 0; i < d; ++i) out[t * d + i] = static_cast<float>(acc[i]);
  }
  return out;
}

void ffn_block(const ReferenceWeights& w, int il, std::vector<float>& x, int64_t n) {
  const HParams& hp = w.hp;
  const ReferenceLayer& l = w.layers[il];
  std::vector<float> h = x;  // [n][n_embd]
  rms_norm(h, l.ffn_norm, n, hp.n_embd, hp.rms_eps);
  if (hp.is_moe()) {
    const std::vector<float> f = moe_ffn(hp, l, h, n);  // [n][n_embd]
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
    return;
  }
  std::vector<float> gate = matmul(h, l.w_gate, n, hp.n_embd, hp.n_ff);  // [n][n_ff]
  std::vector<float> up = matmul(h, l.w_up, n, hp.n_embd, hp.n_ff);      // [n][n_ff]
  for (size_t i = 0; i < gate.size(); ++i) {  // SwiGLU, or GeGLU for Gemma
    gate[i] = static_cast<float>((hp.gemma ? gelu_tanh(gate[i]) : silu(gate[i])) * up[i]);
  }
  std::vector<float> down = matmul(gate, l.w_down, n, hp.n_ff, hp.n_embd);  // [n][n_embd]
  if (hp.gemma) rms_norm(down, l.post_ffn_norm, n, hp.n_embd, hp.rms_eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
}

}  // namespace

Result<ReferenceWeights> load_reference_weights(const Model& model) {
  const Weights& wt = model.weights();
  ReferenceWeights w;
  w.hp = model.hparams();
  const HParams& hp = w.hp;
  MINFER_ASSIGN_OR_RETURN(w.token_embd,
                          dequantize(wt, "token_embd.weight", {hp.n_embd, hp.n_vocab}));
  for (int il = 0; il < hp.n_layer; ++il) {
    MINFER_ASSIGN_OR_RETURN(ReferenceLayer l, load_layer(wt, hp, il));
    w.layers.push_back(std::move(l));
  }
  MINFER_ASSIGN_OR_RETURN(w.output_norm, dequantize(wt, "output_norm.weight", {hp.n_embd}));
  if (hp.tied_output) {
    w.output = w.token_embd;
  } else {
    MINFER_ASSIGN_OR_RETURN(w.output, dequantize(wt, "output.weight", {hp.n_embd, hp.n_vocab}));
  }
  if (hp.has_rope_freqs) {
    MINFER_ASSIGN_OR_RETURN(w.rope_freqs, dequantize(wt, "rope_freqs.weight", {hp.n_rot / 2}));
  }
  return w;
}

std::vector<float> reference_forward(const ReferenceWeights& w, std::span<const int32_t> tokens) {
  const HParams& hp = w.hp;
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t d = hp.n_embd;
  // The residual stream x [n][n_embd] starts as the token embeddings (Gemma
  // scales them by sqrt(n_embd), rounded to f32 as the model defines it).
  const float embd_scale = hp.gemma ? std::sqrt(static_cast<float>(d)) : 1.0f;
  std::vector<float> x(static_cast<size_t>(n * d));
  for (int64_t t = 0; t < n; ++t) {
    assert(tokens[t] >= 0 && tokens[t] < hp.n_vocab);
    for (int64_t i = 0; i < d; ++i) x[t * d + i] = w.token_embd[tokens[t] * d + i] * embd_scale;
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    attention_block(w, il, x, n);
    ffn_block(w, il, x, n);
  }
  rms_norm(x, w.output_norm, n, d, hp.rms_eps);
  return matmul(x, w.output, n, d, hp.n_vocab);  // [n][n_vocab]
}

std::vector<int32_t> make_tokens(int n, int64_t n_vocab, uint64_t seed) {
  std::vector<int32_t> t;
  uint64_t s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(n_vocab)));
  }
  return t;
}

}  // namespace minfer::model::testing
