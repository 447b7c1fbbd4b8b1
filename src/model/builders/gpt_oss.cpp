// gpt-oss (docs/GPT_OSS.md): a pre-norm decoder whose attention has biases
// and per-head sinks, alternates windowed and full layers, and rotates with
// YaRN; its FFN is a mixture of experts with a biased router, biased experts
// and the clamped swiglu_oai activation, weighted by a softmax over the
// chosen experts' logits.
#include "model/builders/layers.h"

namespace minfer::model::builders {
namespace {

using graph::NodeId;
using graph::Op;

// The experts; h: [n_embd, n] (normalized) -> [n_embd, n].
Result<NodeId> moe_ffn(LayerBuilder& b, NodeId h, int il) {
  auto name = [&](const char* w) { return b.layer_name(il, w); };
  // logits: [n_expert, n] from the F32 router, bias added before selection
  MINFER_ASSIGN_OR_RETURN(NodeId logits,
                          b.matmul(h, name("ffn_gate_inp.weight"), name("ffn_gate_inp.bias"), il));
  NodeId ids = b.moe_topk(logits, il);              // i32 [k, n]: the k largest logits
  NodeId weights = b.moe_weights(logits, ids, il);  // [k, n]: softmax over those k
  // gate, up: [n_ff_exp, k*n], row t*k+j from expert ids[j, t], plus its bias row
  MINFER_ASSIGN_OR_RETURN(NodeId gate, b.matmul_id(h, ids, name("ffn_gate_exps.weight"),
                                                   name("ffn_gate_exps.bias"), il));
  MINFER_ASSIGN_OR_RETURN(
      NodeId up, b.matmul_id(h, ids, name("ffn_up_exps.weight"), name("ffn_up_exps.bias"), il));
  NodeId act = b.swiglu_oai(gate, up, il);  // [n_ff_exp, k*n]
  // down: [n_embd, k*n], each row through its own expert, bias before weighting
  MINFER_ASSIGN_OR_RETURN(NodeId down, b.matmul_id(act, ids, name("ffn_down_exps.weight"),
                                                   name("ffn_down_exps.bias"), il));
  return b.moe_sum(down, weights, il);  // [n_embd, n]
}

// One decoder layer; x: [n_embd, n] -> [n_embd, n].
Result<NodeId> gpt_oss_layer(LayerBuilder& b, NodeId x, int il) {
  // biases on q/k/v/o, YaRN RoPE, sinks, a window on the even layers
  MINFER_ASSIGN_OR_RETURN(x, attention_block(b, x, il));  // [n_embd, n]
  MINFER_ASSIGN_OR_RETURN(NodeId h,
                          b.norm(x, b.layer_name(il, "post_attention_norm.weight"), 0, il));
  MINFER_ASSIGN_OR_RETURN(NodeId f, moe_ffn(b, h, il));
  return b.binary(Op::kAdd, x, f, il, "ffn_residual");  // [n_embd, n]
}

}  // namespace

Result<graph::Graph> build_gpt_oss(const HParams& hp, const Weights& w, const GraphParams& p) {
  LayerBuilder b(hp, w, p);
  b.inputs();
  MINFER_ASSIGN_OR_RETURN(NodeId x, b.embed(1.0f));  // [n_embd, n]
  for (int il = 0; il < hp.n_layer; ++il) {
    MINFER_ASSIGN_OR_RETURN(x, gpt_oss_layer(b, x, il));
  }
  MINFER_RETURN_IF_ERROR(b.output(x).status());  // [n_vocab, n_outputs]
  return b.take();
}

}  // namespace minfer::model::builders
