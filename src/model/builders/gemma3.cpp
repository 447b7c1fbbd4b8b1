// Gemma 3: embeddings scaled by sqrt(n_embd); each layer normalizes before
// and after both attention and FFN (the GGUF norm weights already include
// Gemma's +1); per-head q/k RMSNorm; GeGLU FFN (tanh GELU); sliding-window
// attention on five of every six layers, with RoPE base 10000 there and the
// file's base on the global layers; NeoX RoPE; tied output.
#include <cmath>

#include "model/builders/layers.h"

namespace minfer::model::builders {
namespace {

using graph::NodeId;
using graph::Op;

Result<NodeId> gemma3_layer(LayerBuilder& b, NodeId x, int il) {
  const HParams& hp = b.hp();
  auto name = [&](const char* w) { return b.layer_name(il, w); };
  MINFER_ASSIGN_OR_RETURN(NodeId h, b.norm(x, name("attn_norm.weight"), 0, il));  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(NodeId q, b.matmul(h, name("attn_q.weight"), "", il));  // [q_dim, n]
  MINFER_ASSIGN_OR_RETURN(NodeId k, b.matmul(h, name("attn_k.weight"), "", il));  // [kv_dim, n]
  MINFER_ASSIGN_OR_RETURN(NodeId v, b.matmul(h, name("attn_v.weight"), "", il));  // [kv_dim, n]
  MINFER_ASSIGN_OR_RETURN(q, b.norm(q, name("attn_q_norm.weight"), hp.head_dim, il));
  MINFER_ASSIGN_OR_RETURN(k, b.norm(k, name("attn_k_norm.weight"), hp.head_dim, il));
  q = b.rope(q, hp.n_head, il);
  k = b.rope(k, hp.n_head_kv, il);
  NodeId a = b.attention(q, k, v, il);  // [q_dim, n]
  MINFER_ASSIGN_OR_RETURN(NodeId o, b.matmul(a, name("attn_output.weight"), "", il));
  MINFER_ASSIGN_OR_RETURN(o, b.norm(o, name("post_attention_norm.weight"), 0, il));
  x = b.binary(Op::kAdd, x, o, il, "attn_residual");  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(h, b.norm(x, name("ffn_norm.weight"), 0, il));
  MINFER_ASSIGN_OR_RETURN(NodeId gate, b.matmul(h, name("ffn_gate.weight"), "", il));  // [n_ff, n]
  MINFER_ASSIGN_OR_RETURN(NodeId up, b.matmul(h, name("ffn_up.weight"), "", il));      // [n_ff, n]
  NodeId act = b.binary(Op::kMul, b.unary(Op::kGelu, gate, il, "ffn_gelu"), up, il, "ffn_glu");
  MINFER_ASSIGN_OR_RETURN(NodeId down, b.matmul(act, name("ffn_down.weight"), "", il));
  MINFER_ASSIGN_OR_RETURN(down, b.norm(down, name("post_ffw_norm.weight"), 0, il));
  return b.binary(Op::kAdd, x, down, il, "ffn_residual");  // [n_embd, n]
}

}  // namespace

Result<graph::Graph> build_gemma3(const HParams& hp, const Weights& w, const GraphParams& p) {
  LayerBuilder b(hp, w, p);
  b.inputs();
  const float embed_scale = std::sqrt(static_cast<float>(hp.n_embd));
  MINFER_ASSIGN_OR_RETURN(NodeId x, b.embed(embed_scale));  // [n_embd, n]
  for (int il = 0; il < hp.n_layer; ++il) {
    MINFER_ASSIGN_OR_RETURN(x, gemma3_layer(b, x, il));
  }
  MINFER_RETURN_IF_ERROR(b.output(x).status());  // [n_vocab, n_outputs]
  return b.take();
}

}  // namespace minfer::model::builders
