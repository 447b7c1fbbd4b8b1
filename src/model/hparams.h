// Hyper-parameters of a transformer, read only from GGUF metadata.
//
// Contract: load_hparams() reads the `<arch>.*` keys of a supported
// architecture (qwen2, qwen3, qwen3moe, gpt-oss, llama, gemma3), checks them for consistency
// with each other and with the tensor shapes, and returns a plain value. A
// missing key, a key of the wrong type, or an inconsistent value is an error
// naming the key (and the file); an unsupported architecture is an error
// naming it and listing the supported ones; a key the engine cannot honour
// (a mixture-of-experts feature it lacks) is an error naming the key.
// Thread-safe (pure function).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "graph/ir.h"
#include "graph/yarn.h"

namespace minfer::gguf {
class File;
}

namespace minfer::model {

enum class Arch { kQwen2, kQwen3, kQwen3Moe, kGptOss, kLlama, kGemma3 };

// rope.scaling.type: how positions beyond the trained context are reached.
enum class RopeScaling { kNone, kLinear, kYarn };

struct HParams {
  Arch arch = Arch::kLlama;
  std::string arch_name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // of queries and keys (attention.key_length)
  int64_t n_ff = 0;      // dense FFN width (0 in a MoE model without the key)
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-6f;
  int64_t n_rot = 0;  // rotated dimensions per head
  graph::RopeMode rope_mode = graph::RopeMode::kNeox;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  // YaRN (rope_scaling kYarn): the context trained before scaling, the beta
  // bounds of the blend, and the file's extra magnitude factor.
  int64_t n_ctx_orig_yarn = 0;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float rope_attn_factor = 1.0f;
  bool has_rope_freqs = false;  // llama 3: rope_freqs.weight divides the frequencies
  bool qkv_bias = false;
  bool attn_output_bias = false;  // attn_output.bias (gpt-oss)
  bool attn_sinks = false;        // attn_sinks.weight, one logit per query head (gpt-oss)
  bool qk_norm = false;
  bool tied_output = false;
  bool gemma = false;          // embedding * sqrt(n_embd), post norms, GeGLU
  float attn_scale = 0.0f;     // multiplies q.k (1/sqrt(head_dim) unless the family says otherwise)
  int64_t sliding_window = 0;  // gemma3 local layers
  int64_t swa_pattern = 0;     // every swa_pattern-th layer is global (0: none)
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;  // gemma3's local layers are unscaled; gpt-oss's are not
  // Mixture of experts (n_expert > 0): every layer's FFN is n_expert_used of
  // n_expert SwiGLU experts of width n_ff_exp, chosen and weighted per token
  // by `moe_gating` over the router (ffn_gate_inp) logits.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  graph::MoeGating moe_gating = graph::MoeGating::kSoftmaxNormalized;
  // gpt-oss: the router and each expert matrix carry a bias, the experts'
  // activation is the clamped swiglu_oai, and the FFN's input norm is named
  // post_attention_norm.
  bool moe_biases = false;
  bool swiglu_oai = false;
  std::string ffn_norm_name = "ffn_norm";

  bool is_moe() const { return n_expert > 0; }
  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  bool is_swa_layer(int64_t layer) const {
    return swa_pattern > 0 && sliding_window > 0 && (layer % swa_pattern) < swa_pattern - 1;
  }
  float layer_rope_base(int64_t layer) const {
    return is_swa_layer(layer) ? rope_freq_base_swa : rope_freq_base;
  }
  float layer_rope_scale(int64_t layer) const {
    return is_swa_layer(layer) ? rope_freq_scale_swa : rope_freq_scale;
  }
  // The YaRN constants of one layer's RoPE (ext_factor 0 unless kYarn).
  graph::YarnConfig yarn(int64_t layer) const {
    return {n_rot,
            n_ctx_orig_yarn,
            layer_rope_base(layer),
            layer_rope_scale(layer),
            yarn_beta_fast,
            yarn_beta_slow,
            rope_scaling == RopeScaling::kYarn ? 1.0f : 0.0f,
            rope_attn_factor};
  }
};

Result<HParams> load_hparams(const gguf::File& file);

}  // namespace minfer::model
