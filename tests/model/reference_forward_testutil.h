// A plain reference forward pass for the supported architectures (qwen2,
// qwen3, qwen3moe, gpt-oss, llama, gemma3), in the spirit of llama2.c: every weight dequantized
// to f32 once, then naive loops over whole rows, f64 accumulation, no graph,
// no builders, no backend kernels. It exists to be read and to check the
// engine (Session) against an independent statement of the maths.
//
// Contract: load_reference_weights() dequantizes every tensor the forward pass
// needs with quant::dequantize_row and checks its shape against the HParams;
// a missing or misshapen tensor is an error naming it. reference_forward()
// runs a whole token sequence at positions 0 .. n-1 and returns the logits of
// every position, [n_tokens][n_vocab] row-major. Token ids must lie in
// [0, n_vocab) (checked by assert only: this is test code).
// Numerics: weights are the exact dequantized values; activations are f32
// between steps; every dot product, sum of squares and softmax is done in
// double; RoPE angles are computed in double; GELU is the exact tanh formula.
// Threading: pure functions; ReferenceWeights is immutable once loaded.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/hparams.h"
#include "model/model.h"

namespace minfer::model::testing {

// One decoder layer's weights. Matrices are [rows][cols] row-major with the
// GGUF layout (a row per output feature), so y = W x is y[r] = sum_c W[r][c] x[c].
struct ReferenceLayer {
  std::vector<float> attn_norm;       // [n_embd]
  std::vector<float> wq;              // [q_dim][n_embd]
  std::vector<float> wk;              // [kv_dim][n_embd]
  std::vector<float> wv;              // [kv_dim][n_embd]
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim] (qwen2); else empty
  std::vector<float> q_norm, k_norm;  // [head_dim] (qwen3, gemma3); else empty
  std::vector<float> wo;              // [n_embd][q_dim]
  std::vector<float> post_attn_norm;  // [n_embd] (gemma3); else empty
  std::vector<float> ffn_norm;        // [n_embd]
  std::vector<float> w_gate;          // [n_ff][n_embd]
  std::vector<float> w_up;            // [n_ff][n_embd]
  std::vector<float> w_down;          // [n_embd][n_ff]
  std::vector<float> post_ffn_norm;   // [n_embd] (gemma3); else empty
  // Mixture of experts (hp.n_expert > 0; w_gate/w_up/w_down then empty):
  std::vector<float> router;    // [n_expert][n_embd]
  std::vector<float> exp_gate;  // [n_expert][n_ff_exp][n_embd]
  std::vector<float> exp_up;    // [n_expert][n_ff_exp][n_embd]
  std::vector<float> exp_down;  // [n_expert][n_embd][n_ff_exp]
  // gpt-oss (else empty): the output projection's bias, one sink logit per
  // query head, the router's and each expert's biases.
  std::vector<float> bo;             // [n_embd]
  std::vector<float> sinks;          // [n_head]
  std::vector<float> router_bias;    // [n_expert]
  std::vector<float> exp_gate_bias;  // [n_expert][n_ff_exp]
  std::vector<float> exp_up_bias;    // [n_expert][n_ff_exp]
  std::vector<float> exp_down_bias;  // [n_expert][n_embd]
};

struct ReferenceWeights {
  HParams hp;  // a copy: tests may change it (e.g. switch the sliding window off)
  std::vector<float> token_embd;       // [n_vocab][n_embd]
  std::vector<ReferenceLayer> layers;  // [n_layer]
  std::vector<float> output_norm;      // [n_embd]
  std::vector<float> output;           // [n_vocab][n_embd] (a copy of token_embd when tied)
  std::vector<float> rope_freqs;       // [n_rot / 2] (llama 3); else empty
};

Result<ReferenceWeights> load_reference_weights(const Model& model);

// Logits of every position: [tokens.size()][n_vocab].
std::vector<float> reference_forward(const ReferenceWeights& w, std::span<const int32_t> tokens);

// Deterministic token ids in [0, n_vocab) from a linear congruential stream.
std::vector<int32_t> make_tokens(int n, int64_t n_vocab, uint64_t seed = 0x9e3779b97f4a7c15ull);

}  // namespace minfer::model::testing
