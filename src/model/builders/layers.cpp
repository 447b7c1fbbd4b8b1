#include "model/builders/layers.h"

#include "graph/yarn.h"
#include "model/tensor_split.h"

namespace minfer::model::builders {

using graph::DType;
using graph::Node;
using graph::NodeId;
using graph::Op;

namespace {

Node make(Op op, graph::Shape shape, std::vector<NodeId> inputs, std::string name, int layer) {
  Node n;
  n.op = op;
  n.dtype = DType::kF32;
  n.shape = shape;
  n.inputs = std::move(inputs);
  n.name = std::move(name);
  n.layer = layer;
  return n;
}

}  // namespace

NodeId LayerBuilder::input(graph::InputKind kind, graph::Shape shape, const char* name) {
  Node n = make(Op::kInput, shape, {}, name, -1);
  n.dtype = DType::kI32;
  n.meta = graph::InputMeta{kind};
  return add(std::move(n));
}

void LayerBuilder::inputs() {
  using graph::InputKind;
  const graph::Shape s{{p_.n_tokens, 1}};
  g_.tokens = input(InputKind::kTokens, s, "tokens");
  g_.positions = input(InputKind::kPositions, s, "positions");
  if (p_.page_size == 0) return;
  g_.cells = input(InputKind::kCells, s, "cells");
  g_.seq_slots = input(InputKind::kSeqSlots, s, "seq_slots");
  g_.page_table = input(InputKind::kPageTable, {{p_.max_pages, p_.n_slots}}, "page_table");
  g_.output_rows = input(InputKind::kOutputRows, {{p_.n_outputs, 1}}, "output_rows");
}

Result<NodeId> LayerBuilder::embed(float scale) {
  MINFER_ASSIGN_OR_RETURN(const WeightView* emb, w_.require("token_embd.weight"));
  Node n = make(Op::kGetRows, {{hp_.n_embd, p_.n_tokens}}, {g_.tokens}, "embed", -1);
  n.meta = graph::GetRowsMeta{emb->name, {}, scale};
  return add(std::move(n));
}

Result<NodeId> LayerBuilder::norm(NodeId x, const std::string& weight, int64_t group, int layer) {
  MINFER_ASSIGN_OR_RETURN(const WeightView* w, w_.require(weight));
  const int64_t expected = group > 0 ? group : node(x).shape.ne[0];
  if (w->row_length() != expected || w->dims.size() != 1) {
    return Status::invalid_argument("norm weight '" + weight + "' has " +
                                    std::to_string(w->row_length()) + " elements, expected " +
                                    std::to_string(expected));
  }
  Node n = make(Op::kRmsNorm, node(x).shape, {x}, weight, layer);
  n.meta = graph::RmsNormMeta{weight, hp_.rms_eps, group};
  return add(std::move(n));
}

Result<NodeId> LayerBuilder::matmul(NodeId x, const std::string& weight, const std::string& bias,
                                    int layer) {
  MINFER_ASSIGN_OR_RETURN(const WeightView* w, w_.require(weight));
  const int64_t in = node(x).shape.ne[0];
  if (w->dims.size() != 2 || w->row_length() != in) {
    return Status::invalid_argument("matmul weight '" + weight + "' has row length " +
                                    std::to_string(w->row_length()) + ", input has " +
                                    std::to_string(in));
  }
  if (!bias.empty()) MINFER_RETURN_IF_ERROR(w_.require(bias).status());
  const bool partial = p_.tp_ranks > 1 && input_split(weight);
  const std::string b = partial && p_.tp_rank != 0 ? std::string() : bias;
  Node n = make(Op::kMatMul, {{w->dims[1], node(x).shape.ne[1]}}, {x}, weight, layer);
  n.meta = graph::MatMulMeta{weight, b, w->type, in, w->dims[1], p_.batch_invariant};
  const NodeId y = add(std::move(n));
  return partial ? collective(Op::kAllReduce, y, node(y).shape, layer) : y;
}

NodeId LayerBuilder::collective(Op op, NodeId x, graph::Shape shape, int layer) {
  Node n = make(op, shape, {x}, node(x).name + (op == Op::kAllReduce ? ".sum" : ".gather"), layer);
  n.meta = graph::CollectiveMeta{p_.tp_ranks};
  return add(std::move(n));
}

NodeId LayerBuilder::rope(NodeId x, int64_t n_heads, int layer) {
  Node n = make(Op::kRope, node(x).shape, {x, g_.positions}, node(x).name + ".rope", layer);
  graph::RopeMeta m;
  m.n_heads = n_heads;
  m.head_dim = hp_.head_dim;
  m.n_rot = hp_.n_rot;
  m.mode = hp_.rope_mode;
  m.freq_base = hp_.layer_rope_base(layer);
  m.freq_scale = hp_.layer_rope_scale(layer);
  if (hp_.has_rope_freqs) m.freq_factors = "rope_freqs.weight";
  graph::apply_yarn(hp_.yarn(layer), m);
  n.meta = m;
  return add(std::move(n));
}

NodeId LayerBuilder::binary(Op op, NodeId a, NodeId b, int layer, const char* name) {
  return add(make(op, node(a).shape, {a, b}, layer_name(layer, name), layer));
}

NodeId LayerBuilder::unary(Op op, NodeId x, int layer, const char* name) {
  return add(make(op, node(x).shape, {x}, layer_name(layer, name), layer));
}

NodeId LayerBuilder::attention(NodeId q, NodeId k, NodeId v, int layer) {
  // The store has no output value; attention takes it as an input so that it
  // is ordered after the store. Attention also reads the batch's own k and v,
  // which it uses at full precision for the batch's positions.
  // Paged: rows go to the tokens' cells, and attention reads each token's own
  // sequence through the page tables (not the batch's k and v, which mix
  // sequences, unless GraphParams::paged_batch_kv: then they follow as
  // inputs 5 and 6).
  const bool paged = p_.page_size > 0;
  Node store = make(Op::kKvStore, {{0, 0}}, {k, v, paged ? g_.cells : g_.positions},
                    layer_name(layer, "kv_store"), layer);
  store.meta = graph::KvMeta{layer,     hp_.n_head_kv, hp_.head_dim, p_.n_tokens,
                             p_.k_type, p_.v_type,     p_.page_size};
  const NodeId stored = add(std::move(store));
  std::vector<NodeId> attn_inputs = {q, stored, g_.positions, k, v};
  if (paged) attn_inputs = {q, stored, g_.positions, g_.seq_slots, g_.page_table};
  if (paged && p_.paged_batch_kv) attn_inputs.insert(attn_inputs.end(), {k, v});
  Node attn = make(Op::kAttention, node(q).shape, std::move(attn_inputs),
                   layer_name(layer, "attention"), layer);
  graph::AttentionMeta m;
  m.layer = layer;
  m.n_head = hp_.n_head;
  m.n_head_kv = hp_.n_head_kv;
  m.head_dim = hp_.head_dim;
  m.scale = hp_.attn_scale;
  m.sliding_window = hp_.is_swa_layer(layer) ? hp_.sliding_window : 0;
  m.k_type = p_.k_type;
  m.v_type = p_.v_type;
  m.page_size = p_.page_size;
  m.max_pages = p_.max_pages;
  m.one_sequence = p_.one_sequence;
  m.batch_invariant = p_.batch_invariant;
  if (hp_.attn_sinks) m.sinks = layer_name(layer, "attn_sinks.weight");
  attn.meta = m;
  return add(std::move(attn));
}

NodeId LayerBuilder::moe_topk(NodeId logits, int layer) {
  const int64_t n = node(logits).shape.ne[1];
  Node ids = make(Op::kMoeTopK, {{hp_.n_expert_used, n}}, {logits},
                  layer_name(layer, "ffn_moe_topk"), layer);
  ids.dtype = DType::kI32;
  ids.meta = graph::MoeRouteMeta{hp_.n_expert, hp_.n_expert_used, hp_.moe_gating};
  return add(std::move(ids));
}

NodeId LayerBuilder::moe_weights(NodeId logits, NodeId ids, int layer) {
  Node w = make(Op::kMoeWeights, node(ids).shape, {logits, ids},
                layer_name(layer, "ffn_moe_weights"), layer);
  w.meta = graph::MoeRouteMeta{hp_.n_expert, hp_.n_expert_used, hp_.moe_gating};
  return add(std::move(w));
}

Result<NodeId> LayerBuilder::matmul_id(NodeId x, NodeId ids, const std::string& weight,
                                       const std::string& bias, int layer) {
  MINFER_ASSIGN_OR_RETURN(const WeightView* w, w_.require(weight));
  if (!bias.empty()) MINFER_RETURN_IF_ERROR(w_.require(bias).status());
  const int64_t in = node(x).shape.ne[0], k = node(ids).shape.ne[0], n = node(ids).shape.ne[1];
  const int64_t x_rows = node(x).shape.ne[1];
  if (w->dims.size() != 3 || w->row_length() != in || (x_rows != n && x_rows != k * n)) {
    return Status::invalid_argument(
        "expert weight '" + weight + "' (" + std::to_string(w->dims.size()) + "-D, rows of " +
        std::to_string(w->row_length()) + ") does not fit an input of " + std::to_string(x_rows) +
        " rows of " + std::to_string(in));
  }
  Node y = make(Op::kMatMulId, {{w->dims[1], k * n}}, {x, ids}, weight, layer);
  graph::MatMulIdMeta m;
  m.weight = weight;
  // a partial product (the sum after moe_sum completes it): one rank's bias
  m.bias = p_.tp_rank != 0 && input_split(weight) ? std::string() : bias;
  m.weight_type = w->type;
  m.in_dim = in;
  m.out_dim = w->dims[1];
  m.n_expert = w->dims[2];
  m.n_used = k;
  m.per_row_input = x_rows != n;
  m.batch_invariant = p_.batch_invariant;
  y.meta = std::move(m);
  return add(std::move(y));
}

NodeId LayerBuilder::swiglu_oai(NodeId gate, NodeId up, int layer) {
  Node out =
      make(Op::kSwiGLUOai, node(gate).shape, {gate, up}, layer_name(layer, "ffn_moe_glu"), layer);
  out.meta = graph::GluMeta{};  // gpt-oss's alpha 1.702 and limit 7 (llama.cpp's values)
  return add(std::move(out));
}

NodeId LayerBuilder::moe_sum(NodeId y, NodeId weights, int layer) {
  const int64_t k = node(weights).shape.ne[0], n = node(weights).shape.ne[1];
  Node out = make(Op::kMoeSum, {{node(y).shape.ne[0], n}}, {y, weights},
                  layer_name(layer, "ffn_moe_out"), layer);
  out.meta = graph::MoeSumMeta{k};
  const NodeId sum = add(std::move(out));
  return p_.tp_ranks > 1 ? collective(Op::kAllReduce, sum, node(sum).shape, layer) : sum;
}

NodeId LayerBuilder::tail_rows(NodeId x) {
  const int64_t n = node(x).shape.ne[1];
  if (p_.page_size > 0) {  // the rows to keep are an input: any rows, in its order
    Node t = make(Op::kGetRows, {{node(x).shape.ne[0], p_.n_outputs}}, {x, g_.output_rows},
                  "output_rows", -1);
    t.meta = graph::GetRowsMeta{};
    return add(std::move(t));
  }
  if (p_.n_outputs >= n) return x;
  Node t = make(Op::kGetRows, {{node(x).shape.ne[0], p_.n_outputs}}, {x}, "output_rows", -1);
  graph::GetRowsMeta m;
  for (int64_t r = n - p_.n_outputs; r < n; ++r) m.rows.push_back(static_cast<int32_t>(r));
  t.meta = std::move(m);
  return add(std::move(t));
}

Result<NodeId> LayerBuilder::output(NodeId x) {
  x = tail_rows(x);  // [n_embd, n_outputs]
  MINFER_ASSIGN_OR_RETURN(x, norm(x, "output_norm.weight", 0, -1));
  if (p_.hidden_output) {  // embeddings: the normed state is the output
    g_.at(x).name = "hidden_output";
    g_.logits = x;
    return x;
  }
  const std::string w = hp_.tied_output ? "token_embd.weight" : "output.weight";
  MINFER_ASSIGN_OR_RETURN(NodeId logits, matmul(x, w, "", -1));  // [n_vocab, n_outputs]
  if (vocab_split(hp_, p_.tp_ranks)) {  // each rank's rows of the vocabulary, put together
    logits = collective(Op::kAllGather, logits, {{hp_.n_vocab, p_.n_outputs}}, -1);
  }
  g_.at(logits).name = "logits";
  g_.logits = logits;
  if (p_.argmax) {
    Node a = make(Op::kArgMax, {{1, p_.n_outputs}}, {logits}, "argmax", -1);
    a.dtype = DType::kI32;
    a.meta = graph::ArgMaxMeta{node(logits).shape.ne[0]};
    g_.logits = add(std::move(a));
  }
  return g_.logits;
}

}  // namespace minfer::model::builders
