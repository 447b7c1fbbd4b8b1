// The pre-norm decoder family: RMSNorm -> GQA attention -> residual ->
// RMSNorm -> SwiGLU FFN -> residual. The architectures differ only in flags
// read from GGUF (HParams): Qwen2 adds q/k/v biases; Qwen3 adds per-head q/k
// RMSNorm and an explicit head dim; Llama 3 uses adjacent-pair RoPE with
// rope_freqs.weight factors. Qwen uses NeoX-style (split-half) RoPE.
#include "model/builders/layers.h"

namespace minfer::model::builders {
namespace {

using graph::NodeId;
using graph::Op;

// One decoder layer; x: [n_embd, n] -> [n_embd, n].
Result<NodeId> pre_norm_layer(LayerBuilder& b, NodeId x, int il) {
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
  MINFER_ASSIGN_OR_RETURN(NodeId o, b.matmul(a, name("attn_output.weight"), "", il));
  x = b.binary(Op::kAdd, x, o, il, "attn_residual");  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(h, b.norm(x, name("ffn_norm.weight"), 0, il));
  MINFER_ASSIGN_OR_RETURN(NodeId gate, b.matmul(h, name("ffn_gate.weight"), "", il));  // [n_ff, n]
  MINFER_ASSIGN_OR_RETURN(NodeId up, b.matmul(h, name("ffn_up.weight"), "", il));      // [n_ff, n]
  NodeId act = b.binary(Op::kMul, b.unary(Op::kSilu, gate, il, "ffn_silu"), up, il, "ffn_glu");
  MINFER_ASSIGN_OR_RETURN(NodeId down, b.matmul(act, name("ffn_down.weight"), "", il));
  return b.binary(Op::kAdd, x, down, il, "ffn_residual");  // [n_embd, n]
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

Result<graph::Graph> build_qwen2(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

Result<graph::Graph> build_qwen3(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

Result<graph::Graph> build_llama(const HParams& hp, const Weights& w, const GraphParams& p) {
  return build_pre_norm(hp, w, p);
}

}  // namespace minfer::model::builders
