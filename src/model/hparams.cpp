#include "model/hparams.h"

#include <cmath>

#include "gguf/file.h"

namespace minfer::model {
namespace {

Result<Arch> parse_arch(const std::string& name) {
  if (name == "qwen2") return Arch::kQwen2;
  if (name == "qwen3") return Arch::kQwen3;
  if (name == "qwen3moe") return Arch::kQwen3Moe;
  if (name == "gpt-oss") return Arch::kGptOss;
  if (name == "llama") return Arch::kLlama;
  if (name == "gemma3") return Arch::kGemma3;
  return Status::unimplemented("unsupported architecture '" + name +
                               "' (supported: qwen2, qwen3, qwen3moe, gpt-oss, llama, gemma3)");
}

Result<int64_t> positive(const gguf::File& f, const std::string& key) {
  MINFER_ASSIGN_OR_RETURN(uint32_t v, f.get_u32(key));
  if (v == 0) return Status::invalid_argument("key '" + key + "' is 0");
  return static_cast<int64_t>(v);
}

// Tensor `name` must exist with exactly `dims`.
Status expect_shape(const gguf::File& f, const std::string& name, std::vector<int64_t> dims) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return Status::invalid_argument("tensor '" + name + "' not found");
  if (t->dims != dims) {
    auto str = [](const std::vector<int64_t>& d) {
      std::string s = "[";
      for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
      return s + "]";
    };
    return Status::invalid_argument("tensor '" + name + "' has shape " + str(t->dims) +
                                    ", expected " + str(dims) + " from the hyper-parameters");
  }
  return Status::ok();
}

// The router and the 3-D expert tensors of one layer (prefix "blk.N.").
Status check_expert_shapes(const gguf::File& f, const HParams& h, const std::string& b) {
  const int64_t d = h.n_embd, ff = h.n_ff_exp, n = h.n_expert;
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_gate_inp.weight", {d, n}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_gate_exps.weight", {d, ff, n}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_up_exps.weight", {d, ff, n}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_down_exps.weight", {ff, d, n}));
  if (f.find_tensor(b + "ffn_gate_up_exps.weight") != nullptr) {
    return Status::unimplemented("tensor '" + b +
                                 "ffn_gate_up_exps.weight': fused gate and up experts are not "
                                 "supported (separate ffn_gate_exps and ffn_up_exps are)");
  }
  if (!h.moe_biases) return Status::ok();
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_gate_inp.bias", {n}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_gate_exps.bias", {ff, n}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_up_exps.bias", {ff, n}));
  return expect_shape(f, b + "ffn_down_exps.bias", {d, n});
}

// The attention tensors of one layer (prefix "blk.N.").
Status check_attention_shapes(const gguf::File& f, const HParams& h, const std::string& b) {
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_norm.weight", {h.n_embd}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_q.weight", {h.n_embd, h.q_dim()}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_k.weight", {h.n_embd, h.kv_dim()}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_v.weight", {h.n_embd, h.kv_dim()}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_output.weight", {h.q_dim(), h.n_embd}));
  if (h.qkv_bias) {
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_q.bias", {h.q_dim()}));
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_k.bias", {h.kv_dim()}));
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_v.bias", {h.kv_dim()}));
  }
  if (h.attn_output_bias) {
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_output.bias", {h.n_embd}));
  }
  if (h.attn_sinks) MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_sinks.weight", {h.n_head}));
  if (h.qk_norm) {
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_q_norm.weight", {h.head_dim}));
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + "attn_k_norm.weight", {h.head_dim}));
  }
  return Status::ok();
}

Status check_shapes(const gguf::File& f, const HParams& h) {
  MINFER_RETURN_IF_ERROR(expect_shape(f, "token_embd.weight", {h.n_embd, h.n_vocab}));
  MINFER_RETURN_IF_ERROR(expect_shape(f, "output_norm.weight", {h.n_embd}));
  if (!h.tied_output) {
    MINFER_RETURN_IF_ERROR(expect_shape(f, "output.weight", {h.n_embd, h.n_vocab}));
  }
  for (int64_t i = 0; i < h.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    MINFER_RETURN_IF_ERROR(check_attention_shapes(f, h, b));
    MINFER_RETURN_IF_ERROR(expect_shape(f, b + h.ffn_norm_name + ".weight", {h.n_embd}));
    if (h.is_moe()) {
      MINFER_RETURN_IF_ERROR(check_expert_shapes(f, h, b));
    } else {
      MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_gate.weight", {h.n_embd, h.n_ff}));
      MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_up.weight", {h.n_embd, h.n_ff}));
      MINFER_RETURN_IF_ERROR(expect_shape(f, b + "ffn_down.weight", {h.n_ff, h.n_embd}));
    }
    if (h.gemma) {
      MINFER_RETURN_IF_ERROR(expect_shape(f, b + "post_attention_norm.weight", {h.n_embd}));
      MINFER_RETURN_IF_ERROR(expect_shape(f, b + "post_ffw_norm.weight", {h.n_embd}));
    }
  }
  if (h.has_rope_freqs) {
    MINFER_RETURN_IF_ERROR(expect_shape(f, "rope_freqs.weight", {h.n_rot / 2}));
  }
  return Status::ok();
}

// An optional f32 key, left at its default when absent.
Status optional_f32(const gguf::File& f, const std::string& key, float& value) {
  if (!f.has(key)) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(value, f.get_f32(key));
  return Status::ok();
}

// rope.scaling.*: linear divides every frequency; YaRN blends (graph/yarn.h).
Status read_rope_scaling(const gguf::File& f, HParams& h) {
  const std::string a = h.arch_name + ".rope.scaling.";
  h.n_ctx_orig_yarn = h.n_ctx_train;
  if (!f.has(a + "type")) return Status::ok();
  MINFER_ASSIGN_OR_RETURN(std::string type, f.get_string(a + "type"));
  if (type == "none") return Status::ok();
  if (type != "linear" && type != "yarn") {
    return Status::invalid_argument("key '" + a + "type': '" + type +
                                    "' is not supported (linear, yarn)");
  }
  MINFER_ASSIGN_OR_RETURN(float factor, f.get_f32(a + "factor"));
  if (!(factor > 0.0f)) return Status::invalid_argument("key '" + a + "factor' <= 0");
  h.rope_freq_scale = 1.0f / factor;
  h.rope_scaling = type == "linear" ? RopeScaling::kLinear : RopeScaling::kYarn;
  MINFER_RETURN_IF_ERROR(optional_f32(f, a + "attn_factor", h.rope_attn_factor));
  if (h.rope_scaling != RopeScaling::kYarn) return Status::ok();
  if (f.has(a + "original_context_length")) {
    MINFER_ASSIGN_OR_RETURN(h.n_ctx_orig_yarn, positive(f, a + "original_context_length"));
  }
  MINFER_RETURN_IF_ERROR(optional_f32(f, a + "yarn_beta_fast", h.yarn_beta_fast));
  MINFER_RETURN_IF_ERROR(optional_f32(f, a + "yarn_beta_slow", h.yarn_beta_slow));
  for (const char* k : {"yarn_ext_factor", "yarn_attn_factor", "yarn_log_multiplier"}) {
    if (f.has(a + k)) {
      return Status::unimplemented("key '" + a + k + "' is not supported");
    }
  }
  return Status::ok();
}

Status read_common(const gguf::File& f, HParams& h) {
  const std::string a = h.arch_name + ".";
  MINFER_ASSIGN_OR_RETURN(h.n_embd, positive(f, a + "embedding_length"));
  MINFER_ASSIGN_OR_RETURN(h.n_layer, positive(f, a + "block_count"));
  MINFER_ASSIGN_OR_RETURN(h.n_head, positive(f, a + "attention.head_count"));
  h.n_head_kv = h.n_head;
  if (f.has(a + "attention.head_count_kv")) {
    MINFER_ASSIGN_OR_RETURN(h.n_head_kv, positive(f, a + "attention.head_count_kv"));
  }
  if (h.n_head % h.n_head_kv != 0) {
    return Status::invalid_argument(
        "key '" + a + "attention.head_count' (" + std::to_string(h.n_head) +
        ") is not a multiple of head_count_kv (" + std::to_string(h.n_head_kv) + ")");
  }
  if (f.has(a + "feed_forward_length")) {  // required below unless the model is a MoE
    MINFER_ASSIGN_OR_RETURN(h.n_ff, positive(f, a + "feed_forward_length"));
  }
  MINFER_ASSIGN_OR_RETURN(h.n_ctx_train, positive(f, a + "context_length"));
  MINFER_ASSIGN_OR_RETURN(h.rms_eps, f.get_f32(a + "attention.layer_norm_rms_epsilon"));
  if (!(h.rms_eps > 0.0f))
    return Status::invalid_argument("key '" + a + "attention.layer_norm_rms_epsilon' <= 0");
  h.head_dim = h.n_embd / h.n_head;
  if (f.has(a + "attention.key_length")) {
    MINFER_ASSIGN_OR_RETURN(h.head_dim, positive(f, a + "attention.key_length"));
  }
  if (f.has(a + "attention.value_length")) {
    MINFER_ASSIGN_OR_RETURN(int64_t v, positive(f, a + "attention.value_length"));
    if (v != h.head_dim) {
      return Status::invalid_argument("key '" + a + "attention.value_length' (" +
                                      std::to_string(v) + ") differs from key_length (" +
                                      std::to_string(h.head_dim) + "): unsupported");
    }
  }
  if (f.has(a + "rope.freq_base")) {
    MINFER_ASSIGN_OR_RETURN(h.rope_freq_base, f.get_f32(a + "rope.freq_base"));
  }
  h.n_rot = h.head_dim;
  if (f.has(a + "rope.dimension_count")) {
    MINFER_ASSIGN_OR_RETURN(h.n_rot, positive(f, a + "rope.dimension_count"));
    if (h.n_rot > h.head_dim || h.n_rot % 2 != 0) {
      return Status::invalid_argument("key '" + a + "rope.dimension_count' (" +
                                      std::to_string(h.n_rot) + ") must be even and <= head dim " +
                                      std::to_string(h.head_dim));
    }
  }
  return read_rope_scaling(f, h);
}

// A key that asks for a mixture-of-experts feature the engine lacks.
Status refuse_unless(bool ok, const std::string& key, const std::string& why) {
  if (ok) return Status::ok();
  return Status::unimplemented("key '" + key + "': " + why + " is not supported");
}

// The mixture-of-experts keys llama.cpp writes (gguf-py's Keys.LLM.EXPERT_*).
Status read_moe(const gguf::File& f, HParams& h) {
  const std::string a = h.arch_name + ".";
  MINFER_ASSIGN_OR_RETURN(h.n_expert, positive(f, a + "expert_count"));
  MINFER_ASSIGN_OR_RETURN(h.n_expert_used, positive(f, a + "expert_used_count"));
  if (h.n_expert_used > h.n_expert) {
    return Status::invalid_argument("key '" + a + "expert_used_count' (" +
                                    std::to_string(h.n_expert_used) + ") exceeds expert_count (" +
                                    std::to_string(h.n_expert) + ")");
  }
  // As llama.cpp: without the expert width, the dense width split over the used experts.
  if (f.has(a + "expert_feed_forward_length") || h.n_ff == 0) {
    MINFER_ASSIGN_OR_RETURN(h.n_ff_exp, positive(f, a + "expert_feed_forward_length"));
  } else {
    h.n_ff_exp = h.n_ff / h.n_expert_used;
  }
  for (const char* k : {"expert_shared_count", "expert_shared_feed_forward_length"}) {
    if (!f.has(a + k)) continue;
    MINFER_ASSIGN_OR_RETURN(uint32_t v, f.get_u32(a + k));
    MINFER_RETURN_IF_ERROR(refuse_unless(v == 0, a + k, "a shared expert"));
  }
  if (f.has(a + "expert_group_count")) {
    MINFER_ASSIGN_OR_RETURN(uint32_t v, f.get_u32(a + "expert_group_count"));
    MINFER_RETURN_IF_ERROR(refuse_unless(v <= 1, a + "expert_group_count", "grouped routing"));
  }
  if (f.has(a + "expert_weights_scale")) {
    MINFER_ASSIGN_OR_RETURN(float v, f.get_f32(a + "expert_weights_scale"));
    MINFER_RETURN_IF_ERROR(
        refuse_unless(v == 0.0f || v == 1.0f, a + "expert_weights_scale", "scaled expert weights"));
  }
  // llama.cpp's gating enum: 1 softmax (qwen3moe), 3 softmax over the
  // selected logits (gpt-oss, whose architecture implies it).
  const bool gpt_oss = h.arch == Arch::kGptOss;
  const uint32_t gating = gpt_oss ? 3 : 1;
  if (f.has(a + "expert_gating_func")) {
    MINFER_ASSIGN_OR_RETURN(uint32_t v, f.get_u32(a + "expert_gating_func"));
    MINFER_RETURN_IF_ERROR(refuse_unless(v == gating, a + "expert_gating_func",
                                         "gating function " + std::to_string(v)));
  }
  // Qwen3-MoE renormalizes the selected probabilities (norm_topk_prob;
  // llama.cpp always does for this architecture); the key can say otherwise.
  // gpt-oss's weights already sum to 1.
  bool norm = !gpt_oss;
  if (f.has(a + "expert_weights_norm")) {
    MINFER_ASSIGN_OR_RETURN(norm, f.get_bool(a + "expert_weights_norm"));
    MINFER_RETURN_IF_ERROR(refuse_unless(!gpt_oss || !norm, a + "expert_weights_norm",
                                         "renormalized top-k-softmax weights"));
  }
  h.moe_gating = gpt_oss ? graph::MoeGating::kTopKSoftmax
                 : norm  ? graph::MoeGating::kSoftmaxNormalized
                         : graph::MoeGating::kSoftmax;
  return Status::ok();
}

// gpt-oss: biases everywhere, attention sinks, a window of attention on
// every other layer, and the same RoPE base and YaRN on every layer
// (docs/GPT_OSS.md).
Status read_gpt_oss(const gguf::File& f, HParams& h) {
  const std::string a = h.arch_name + ".";
  h.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  h.attn_output_bias = true;
  h.attn_sinks = true;
  h.moe_biases = true;
  h.swiglu_oai = true;
  h.ffn_norm_name = "post_attention_norm";
  MINFER_ASSIGN_OR_RETURN(h.sliding_window, positive(f, a + "attention.sliding_window"));
  h.swa_pattern = 2;
  if (f.has(a + "attention.sliding_window_pattern")) {
    MINFER_ASSIGN_OR_RETURN(h.swa_pattern, positive(f, a + "attention.sliding_window_pattern"));
  }
  h.rope_freq_base_swa = h.rope_freq_base;
  h.rope_freq_scale_swa = h.rope_freq_scale;
  MINFER_RETURN_IF_ERROR(optional_f32(f, a + "rope.freq_base_swa", h.rope_freq_base_swa));
  MINFER_RETURN_IF_ERROR(read_moe(f, h));
  if (h.tied_output) {
    return Status::invalid_argument("tensor 'output.weight' not found (gpt-oss needs it)");
  }
  return Status::ok();
}

}  // namespace

Result<HParams> load_hparams(const gguf::File& f) {
  HParams h;
  MINFER_ASSIGN_OR_RETURN(h.arch_name, f.get_string("general.architecture"));
  MINFER_ASSIGN_OR_RETURN(h.arch, parse_arch(h.arch_name));
  MINFER_RETURN_IF_ERROR(read_common(f, h));
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (emb == nullptr || emb->dims.size() != 2) {
    return Status::invalid_argument("tensor 'token_embd.weight' missing or not 2-D");
  }
  h.n_vocab = emb->dims[1];
  h.tied_output = f.find_tensor("output.weight") == nullptr;
  switch (h.arch) {
    case Arch::kQwen2:
      h.qkv_bias = true;
      break;
    case Arch::kQwen3:
      h.qk_norm = true;
      break;
    case Arch::kQwen3Moe:
      h.qk_norm = true;
      MINFER_RETURN_IF_ERROR(read_moe(f, h));
      break;
    case Arch::kGptOss:
      MINFER_RETURN_IF_ERROR(read_gpt_oss(f, h));
      break;
    case Arch::kLlama:
      h.rope_mode = graph::RopeMode::kNormal;
      h.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
      break;
    case Arch::kGemma3: {
      h.gemma = true;
      h.qk_norm = true;
      // Gemma 3 alternates five sliding-window layers with one global layer;
      // the local layers use RoPE base 10000 (not stored in GGUF files).
      h.swa_pattern = 6;
      if (f.has("gemma3.attention.sliding_window_pattern")) {
        MINFER_ASSIGN_OR_RETURN(h.swa_pattern,
                                positive(f, "gemma3.attention.sliding_window_pattern"));
      }
      MINFER_ASSIGN_OR_RETURN(h.sliding_window, positive(f, "gemma3.attention.sliding_window"));
      h.rope_freq_base_swa = 10000.0f;
      break;
    }
  }
  if (!h.is_moe() && h.n_ff == 0) {
    MINFER_ASSIGN_OR_RETURN(h.n_ff, positive(f, h.arch_name + ".feed_forward_length"));
  }
  h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  MINFER_RETURN_IF_ERROR(check_shapes(f, h));
  return h;
}

}  // namespace minfer::model
