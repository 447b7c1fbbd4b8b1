// Shared pieces of the transformer builders: each helper appends the nodes of
// one step (with a shape comment) and returns the id of its output.
#pragma once

#include <string>

#include "base/status.h"
#include "graph/ir.h"
#include "model/graph_params.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer::model::builders {

class LayerBuilder {
 public:
  LayerBuilder(const HParams& hp, const Weights& w, const GraphParams& p) : hp_(hp), w_(w), p_(p) {}

  graph::Graph take() { return std::move(g_); }
  graph::Graph& graph() { return g_; }
  const HParams& hp() const { return hp_; }
  const GraphParams& params() const { return p_; }

  // tokens, positions: i32 [n_tokens]; paged (GraphParams::page_size > 0)
  // also cells, seq_slots [n_tokens], page_table [max_pages, n_slots] and
  // output_rows [n_outputs].
  void inputs();
  // x: f32 [n_embd, n_tokens] = token_embd rows (times `scale`)
  Result<graph::NodeId> embed(float scale);
  // RMSNorm over rows (group 0) or per head (group = head_dim), times weight.
  Result<graph::NodeId> norm(graph::NodeId x, const std::string& weight, int64_t group, int layer);
  // y: f32 [out, n] = x W^T (+ bias). Split over tensor-parallel ranks
  // along its input (model/tensor_split.h), the ranks' partial products are
  // summed by an all-reduce node, the bias added on rank 0 only.
  Result<graph::NodeId> matmul(graph::NodeId x, const std::string& weight, const std::string& bias,
                               int layer);
  graph::NodeId rope(graph::NodeId x, int64_t n_heads, int layer);
  graph::NodeId binary(graph::Op op, graph::NodeId a, graph::NodeId b, int layer, const char* name);
  graph::NodeId unary(graph::Op op, graph::NodeId x, int layer, const char* name);
  // Stores k, v at the batch positions and attends over the layer's cache:
  // f32 [q_dim, n_tokens].
  graph::NodeId attention(graph::NodeId q, graph::NodeId k, graph::NodeId v, int layer);
  // Mixture of experts (docs/MOE.md). ids: i32 [k, n] = each token's
  // hp().n_expert_used experts from router logits [n_expert, n].
  graph::NodeId moe_topk(graph::NodeId logits, int layer);
  // weights: f32 [k, n] = the gating weights of those experts.
  graph::NodeId moe_weights(graph::NodeId logits, graph::NodeId ids, int layer);
  // y: f32 [out, k*n], row t*k+j = x_t (x: [in, n]) or row t*k+j of x (x:
  // [in, k*n]) times expert ids[j, t] of the 3-D weight [in, out, n_expert]
  // (+ that expert's row of the optional bias [out, n_expert]).
  Result<graph::NodeId> matmul_id(graph::NodeId x, graph::NodeId ids, const std::string& weight,
                                  const std::string& bias, int layer);
  // gpt-oss's clamped GLU; gate, up: f32 [n_ff_exp, m] -> [n_ff_exp, m].
  graph::NodeId swiglu_oai(graph::NodeId gate, graph::NodeId up, int layer);
  // out: f32 [d, n], row t = sum over j of y[t*k+j] * weights[j, t]
  // (tensor-parallel: the ranks' sums then summed by an all-reduce node).
  graph::NodeId moe_sum(graph::NodeId y, graph::NodeId weights, int layer);
  // Keeps the last n_outputs rows (paged: the output_rows input's rows):
  // f32 [n, n_outputs].
  graph::NodeId tail_rows(graph::NodeId x);
  // logits: f32 [n_vocab, n_outputs] = norm(x) W_out^T; with
  // GraphParams::hidden_output the graph ends at norm(x): f32 [n_embd, n_outputs]
  Result<graph::NodeId> output(graph::NodeId x);

  std::string layer_name(int layer, const char* what) const {
    return "blk." + std::to_string(layer) + "." + what;
  }

 private:
  const graph::Node& node(graph::NodeId id) const { return g_.at(id); }
  graph::NodeId input(graph::InputKind kind, graph::Shape shape, const char* name);
  // A collective over the tensor-parallel ranks (kAllReduce, kAllGather) of x.
  graph::NodeId collective(graph::Op op, graph::NodeId x, graph::Shape shape, int layer);
  graph::NodeId add(graph::Node n) { return g_.add(std::move(n)); }

  const HParams& hp_;
  const Weights& w_;
  const GraphParams& p_;
  graph::Graph g_;
};

// The attention half of a pre-norm layer, residual included: RMSNorm, the
// q/k/v projections (with biases and per-head q/k norms as HParams says),
// RoPE, attention (with sinks where the model has them), the output
// projection (with its bias where it has one); x: [n_embd, n] -> [n_embd, n].
Result<graph::NodeId> attention_block(LayerBuilder& b, graph::NodeId x, int il);

// The per-architecture forward passes.
Result<graph::Graph> build_qwen2(const HParams& hp, const Weights& w, const GraphParams& p);
Result<graph::Graph> build_qwen3(const HParams& hp, const Weights& w, const GraphParams& p);
Result<graph::Graph> build_qwen3moe(const HParams& hp, const Weights& w, const GraphParams& p);
Result<graph::Graph> build_llama(const HParams& hp, const Weights& w, const GraphParams& p);
Result<graph::Graph> build_gemma3(const HParams& hp, const Weights& w, const GraphParams& p);
Result<graph::Graph> build_gpt_oss(const HParams& hp, const Weights& w, const GraphParams& p);

}  // namespace minfer::model::builders
