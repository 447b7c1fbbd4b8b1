// The pre-norm decoder family: RMSNorm -> GQA attention -> residual ->
// RMSNorm -> SwiGLU FFN -> residual. The architectures differ only in flags
// read from GGUF (HParams): Qwen2 adds q/k/v biases; Qwen3 adds per-head q/k
// RMSNorm and an explicit head dim; Llama 3 uses adjacent-pair RoPE with
// rope_freqs.weight factors. Qwen uses NeoX-style (split-half) RoPE.
// Qwen3-MoE is Qwen3 with a mixture-of-experts FFN in every layer.
#include "model/builders/layers.h"

namespace minfer::model::builders {
namespace {

using graph::NodeId;
using graph::Op;

// The SwiGLU FFN; h: [n_embd, n] (normalized) -> [n_embd, n].
Result<NodeId> dense_ffn(LayerBuilder& b, NodeId h, int il) {
  auto name = [&](const char* w) { return b.layer_name(il, w); };
  MINFER_ASSIGN_OR_RETURN(NodeId gate, b.matmul(h, name("ffn_gate.weight"), "", il));  // [n_ff, n]
  MINFER_ASSIGN_OR_RETURN(NodeId up, b.matmul(h, name("ffn_up.weight"), "", il));      // [n_ff, n]
  NodeId act = b.binary(Op::kMul, b.unary(Op::kSilu, gate, il, "ffn_silu"), up, il, "ffn_glu");
  return b.matmul(act, name("ffn_down.weight"), "", il);  // [n_embd, n]
}

// The mixture-of-experts FFN: each token's k = n_expert_used SwiGLU experts
// of n_expert, chosen and weighted by the router; h: [n_embd, n] -> [n_embd, n].
Result<NodeId> moe_ffn(LayerBuilder& b, NodeId h, int il) {
  auto name = [&](const char* w) { return b.layer_name(il, w); };
  // logits: [n_expert, n] from the F32 router
  MINFER_ASSIGN_OR_RETURN(NodeId logits, b.matmul(h, name("ffn_gate_inp.weight"), "", il));
  NodeId ids = b.moe_topk(logits, il);              // i32 [k, n]
  NodeId weights = b.moe_weights(logits, ids, il);  // [k, n]
  // gate, up: [n_ff_exp, k*n], row t*k+j from expert ids[j, t]
  MINFER_ASSIGN_OR_RETURN(NodeId gate, b.matmul_id(h, ids, name("ffn_gate_exps.weight"), "", il));
  MINFER_ASSIGN_OR_RETURN(NodeId up, b.matmul_id(h, ids, name("ffn_up_exps.weight"), "", il));
  NodeId act = b.binary(Op::kMul, b.unary(Op::kSilu, gate, il, "ffn_moe_silu"), up, il,
                        "ffn_moe_glu");  // [n_ff_exp, k*n]
  // down: [n_embd, k*n], each row through its own expert
  MINFER_ASSIGN_OR_RETURN(NodeId down, b.matmul_id(act, ids, name("ffn_down_exps.weight"), "", il));
  return b.moe_sum(down, weights, il);  // [n_embd, n]
}

// One decoder layer; x: [n_embd, n] -> [n_embd, n].
Result<NodeId> pre_norm_layer(LayerBuilder& b, NodeId x, int il) {
  MINFER_ASSIGN_OR_RETURN(x, attention_block(b, x, il));  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(NodeId h, b.norm(x, b.layer_name(il, "ffn_norm.weight"), 0, il));
  MINFER_ASSIGN_OR_RETURN(NodeId f, b.hp().is_moe() ? moe_ffn(b, h, il) : dense_ffn(b, h, il));
  return b.binary(Op::kAdd, x, f, il, "ffn_residual");  // [n_embd, n]
}

Result<graph::Graph> build_pre_norm(const HParams& hp, const Weights& w, const GraphParams& p) {
  LayerBuilder b(hp, w, p);
  b.inputs();
  MINFER_ASSIGN_OR_RETURN(NodeId x, b.embed(1.0f));  // [n_embd, n]
  for (int il = 0; il < hp.n_layer; ++il) {
    MINFER_ASSIGN_OR_RETURN(x, pre_norm_layer(b, x, il));
  }
  MINFER_RETURN_IF_ERROR(b.output(x).status());  // [n_vocab, n_outputs]
  return b.take();
}

}  // namespace

// The attention half of a pre-norm layer, residual included (layers.h).
Result<NodeId> attention_block(LayerBuilder& b, NodeId x, int il) {
  const HParams& hp = b.hp();
  auto name = [&](const char* w) { return b.layer_name(il, w); };
  auto bias = [&](const char* w) { return hp.qkv_bias ? name(w) : std::string(); };
  MINFER_ASSIGN_OR_RETURN(NodeId h, b.norm(x, name("attn_norm.weight"), 0, il));  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(NodeId q, b.matmul(h, name("attn_q.weight"), bias("attn_q.bias"), il));
  MINFER_ASSIGN_OR_RETURN(NodeId k, b.matmul(h, name("attn_k.weight"), bias("attn_k.bias"), il));
  MINFER_ASSIGN_OR_RETURN(NodeId v, b.matmul(h, name("attn_v.weight"), bias("attn_v.bias"), il));
  if (hp.qk_norm) {  // per-head norms over head_dim chunks
    MINFER_ASSIGN_OR_RETURN(q, b.norm(q, name("attn_q_norm.weight"), hp.head_dim, il));
    MINFER_ASSIGN_OR_RETURN(k, b.norm(k, name("attn_k_norm.weight"), hp.head_dim, il));
  }
  q = b.rope(q, hp.n_head, il);         // [q_dim, n]
  k = b.rope(k, hp.n_head_kv, il);      // [kv_dim, n]
  NodeId a = b.attention(q, k, v, il);  // [q_dim, n]
  const std::string o_bias = hp.attn_output_bias ? name("attn_output.bias") : std::string();
  MINFER_ASSIGN_OR_RETURN(NodeId o, b.matmul(a, name("attn_output.weight"), o_bias, il));
  return b.binary(Op::kAdd, x, o, il, "attn_residual");  // [n_embd, n]
}

Result<graph::Graph> build_qwen2(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

Result<graph::Graph> build_qwen3(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

Result<graph::Graph> build_qwen3moe(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

Result<graph::Graph> build_llama(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

}  // namespace minfer::model::builders
