// The compute graph's intermediate representation: typed nodes, one per op.
//
// A Graph is built once per GraphParams by an architecture builder
// (model/builders), rewritten by the fusion pass, assigned to backends, given
// buffers by the allocator and run by the executor. Nodes are stored in
// execution order (every input precedes its user).
//
// Tensors are row-major with the row length first: shape {ne0, ne1} holds ne1
// rows of ne0 elements (activations: {features, tokens}). Sizes are in bytes;
// the IR is typed (f32, f16, i32) and no value travels as another type's bits.
// Weights are not nodes: they are named (GGUF tensor names) in the node's
// metadata and looked up by each backend in its own registry.
//
// Threading: a Graph is immutable once built; concurrent readers are fine.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "quant/tensor_type.h"

namespace minfer::graph {

enum class DType : uint8_t { kF32, kF16, kI32 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

enum class Op : uint8_t {
  kInput,         // graph input: token ids or positions (i32), filled by the runtime
  kGetRows,       // rows of a weight (embedding lookup) or of an activation (tail rows)
  kRmsNorm,       // x / rms(x) * weight, over rows (or per head: RmsNormMeta::group)
  kMatMul,        // y = x W^T (+ bias)
  kAdd,           // a + b (same shape)
  kMul,           // a * b (same shape)
  kScale,         // x * scalar
  kRope,          // rotary position embedding over heads, positions from an input node
  kKvStore,       // writes k and v rows into the layer's KV cache at their positions
  kAttention,     // softmax(q K^T * scale + mask) V over the layer's KV cache
  kSilu,          // x * sigmoid(x)
  kGelu,          // tanh-approximated GELU
  kSwiGLU,        // silu(gate) * up            (fusion of Mul(Silu(g), u))
  kGeGLU,         // gelu(gate) * up            (fusion of Mul(Gelu(g), u))
  kFusedQKV,      // decode: q, k, v matmuls + biases + RoPE + KV store, output [q|k|v]
  kFusedQkvNorm,  // decode: as kFusedQKV with per-head q/k RMSNorm before RoPE
  kFusedFFN,      // decode: gate and up matmuls + SwiGLU/GeGLU
  kMatMulAdd,     // y = x W^T (+ bias) + r: a matmul fused with the residual add after it
  kArgMax,        // i32 [1, rows]: each row's first largest element (NaN never; -1: all -inf)
  // Mixture of experts (MoeRouteMeta, MatMulIdMeta, MoeSumMeta; docs/MOE.md):
  kMoeTopK,     // i32 [k, T]: each token's k experts from router logits [n_expert, T]
  kMoeWeights,  // f32 [k, T]: the gating weights of those experts (logits, ids)
  kMatMulId,    // f32 [out, k*T]: row t*k+j = x_t (or row t*k+j of x) times expert ids[j,t]
  kMoeSum,      // f32 [d, T]: row t = sum over j of y[t*k+j] * weights[j,t]
  kSwiGLUOai,   // gpt-oss's clamped GLU of (gate, up) (GluMeta; docs/GPT_OSS.md)
  // Tensor parallelism (docs/PARALLEL.md): collectives over the ranks of a group.
  kAllReduce,  // f32: every rank's partial sums, added in rank order (same shape)
  kAllGather,  // f32 [ne0 * parts, rows]: each row the ranks' rows side by side (CollectiveMeta)
  kCount,
};

// What the planner, executor and fusion pass need to know of an op, in one
// table (ir.cpp; a static_assert keeps it one row per Op).
struct OpTraits {
  const char* name;  // as traces and errors print it ("mul_mat")
  bool in_place;     // the output may overwrite input 0 element by element
  bool uses_kv;      // reads or writes its layer's KV cache (execute_node gets the KvPair)
  bool writes_kv;    // stores into the cache: a side effect, so never a dead node
};

const OpTraits& op_traits(Op op);
inline const char* op_name(Op op) {
  return op_traits(op).name;
}

using NodeId = int32_t;
constexpr NodeId kNoNode = -1;

struct Shape {
  std::array<int64_t, 2> ne{1, 1};  // ne[0] = row length
  int64_t elements() const { return ne[0] * ne[1]; }
  int64_t rows() const { return ne[1]; }
  bool operator==(const Shape&) const = default;
};

// Graph inputs, filled by the runtime before each forward. Batches of many
// sequences over a paged KV pool (GraphParams::page_size > 0) also carry each
// token's cache cell, the page-table slot of its sequence, the page tables,
// and which rows need logits.
enum class InputKind : uint8_t {
  kTokens,      // i32 [n_tokens]
  kPositions,   // i32 [n_tokens], positions within each token's own sequence
  kCells,       // i32 [n_tokens], the cache row each token's k and v go to
  kSeqSlots,    // i32 [n_tokens], the page-table row of each token's sequence
  kPageTable,   // i32 [max_pages, n_slots]: page ids of each slot's positions
  kOutputRows,  // i32 [n_outputs], batch rows whose logits are computed
};

struct InputMeta {
  InputKind kind;
};

struct GetRowsMeta {
  // empty: gather rows of input 0 (by `rows`, or by the ids of input 1 when
  // `rows` is empty); else rows of this weight by ids (input 0)
  std::string weight;
  std::vector<int32_t> rows;  // activation gather: which rows, in order
  float scale = 1.0f;         // multiply the gathered rows (gemma: sqrt(n_embd))
};

struct RmsNormMeta {
  std::string weight;  // empty: no weight
  float eps = 1e-6f;
  int64_t group = 0;  // 0: normalize whole rows; else normalize each chunk of `group` elements
};

// An RMSNorm of a node's input folded into the node (the fusion pass's
// input-norm rule: FusedQKV, FusedFFN, and MatMul/MatMulAdd on a backend
// that claims supports_fused(kRmsNorm)): the node reads the un-normalized x
// and normalizes it itself, x / sqrt(mean(x^2) + eps) * weight (no weight
// when empty).
struct InputNorm {
  bool on = false;
  std::string weight;
  float eps = 1e-6f;
};

// batch_invariant (here, in FusedFfnMeta and AttentionMeta): each token's
// result must not depend on the other tokens of the batch or their number,
// bit for bit (GraphParams::batch_invariant; a backend picks its kernels
// accordingly).
struct MatMulMeta {
  std::string weight;  // [in_dim, out_dim] in GGUF order
  std::string bias;    // optional [out_dim]
  quant::TensorType weight_type = quant::TensorType::F32;
  int64_t in_dim = 0, out_dim = 0;
  bool batch_invariant = false;
  InputNorm in_norm{};  // off unless the fusion pass folded the input's RMSNorm
};

struct ScaleMeta {
  float scale = 1.0f;
};

enum class RopeMode : uint8_t { kNormal, kNeox };

struct RopeMeta {
  int64_t n_heads = 0, head_dim = 0, n_rot = 0;
  RopeMode mode = RopeMode::kNeox;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  std::string freq_factors;  // optional weight of per-frequency divisors (llama 3 rope_freqs)
  // YaRN (graph/yarn.h computes these once for every backend). ext_factor 0
  // is plain RoPE: theta = freq_scale * theta_extrap and no magnitude scale.
  // Else pair i's theta blends theta_extrap (pairs below corr_low) into
  // freq_scale * theta_extrap (pairs from corr_high) by ramp * ext_factor,
  // and cos and sin are multiplied by mscale.
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
  float mscale = 1.0f;
};

// k_type/v_type: the KV cache's row types (F32, F16, Q8_0), so that a
// backend's supports_op can refuse a cache it cannot read.
// page_size > 0 (a paged pool of many sequences): inputs are (k, v, cells),
// each token's row going to its cell; else (k, v, positions), row = position.
struct KvMeta {
  int layer = 0;
  int64_t n_head_kv = 0, head_dim = 0;
  int64_t n_tokens = 0;  // rows of k and v to store
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  int64_t page_size = 0;  // 0: one sequence whose cache rows are its positions
};

struct AttentionMeta {
  int layer = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t sliding_window = 0;  // 0: full causal attention
  // Optional f32 [n_head] weight: one logit per query head that joins the
  // softmax's denominator only (no value row, not scaled), so a row's
  // weights sum to less than 1 (gpt-oss; docs/GPT_OSS.md "Attention sinks").
  std::string sinks;
  quant::TensorType k_type = quant::TensorType::F32;
  quant::TensorType v_type = quant::TensorType::F32;
  // Input 0 holds packed rows [q | k | v] (the output of a FusedQKV node;
  // inputs: packed, positions, and paged: seq_slots, page_table) instead of
  // q (inputs: q, store, positions, k, v).
  bool packed_qkv = false;
  // page_size > 0: a paged pool of many sequences. Inputs are (q, store,
  // positions, seq_slots, page_table): token t attends the positions of its
  // own sequence up to positions[t], position j of slot s living in cell
  // page_table[s][j / page_size] * page_size + j % page_size.
  int64_t page_size = 0;
  int64_t max_pages = 0;  // page-table row length
  // Paged: the batch's tokens are token 0's sequence's but padding ones at
  // the end, whose results nobody reads (GraphParams::one_sequence). A
  // backend may then share key/value tiles across all query rows.
  bool one_sequence = false;
  bool batch_invariant = false;
};

// The q, k and v projections of one layer fused with what follows them up to
// the KV store. Output: rows [q (n_head*head_dim) | k | v (n_head_kv*head_dim
// each)] with biases added, q/k normalized per head (q_norm/k_norm non-empty)
// and rotated; k and v are also written to the layer's cache at the positions
// (paged, kv.page_size > 0: at the cells). Inputs: the normalized hidden
// state (or the hidden state, with in_norm), positions, and paged: cells.
struct FusedQkvMeta {
  std::string q_weight, k_weight, v_weight;
  std::string q_bias, k_bias, v_bias;  // optional
  std::string q_norm, k_norm;          // optional (kFusedQkvNorm)
  int64_t in_dim = 0;
  float norm_eps = 1e-6f;
  RopeMeta rope;  // n_heads = n_head (k uses n_head_kv), head_dim, mode, bases
  KvMeta kv;
  int64_t n_head = 0;
  InputNorm in_norm;
  bool batch_invariant = false;  // as the projections' MatMulMeta
};

// act(x Wg^T) * (x Wu^T), act = SiLU or GELU. Input: the normalized hidden
// state (or the hidden state, with in_norm).
struct FusedFfnMeta {
  std::string gate_weight, up_weight;
  bool gelu = false;
  int64_t in_dim = 0, n_ff = 0;
  InputNorm in_norm;
  bool batch_invariant = false;
};

// ArgMax over rows of row_len floats (the input's ne[0]).
struct ArgMaxMeta {
  int64_t row_len = 0;
};

// How a mixture-of-experts layer turns router logits into k experts and
// their weights. Scores are compared by value, larger first, a tie going to
// the lower expert id.
enum class MoeGating : uint8_t {
  // p = softmax over all n_expert logits; the k largest p; weights are those p.
  kSoftmax,
  // as kSoftmax, the k weights then divided by their sum (GGUF
  // `<arch>.expert_weights_norm`; the sum is clamped below at 2^-14).
  kSoftmaxNormalized,
  // the k largest logits; weights are the softmax over those k logits only.
  kTopKSoftmax,
};

// kMoeTopK (input: logits f32 [n_expert, T]; output i32 [n_used, T]: ids in
// descending score) and kMoeWeights (inputs: logits, the kMoeTopK ids;
// output f32 [n_used, T]: weight j of token t belongs to expert ids[j, t]).
// Both nodes of one layer carry the same meta.
struct MoeRouteMeta {
  int64_t n_expert = 0;
  int64_t n_used = 0;  // k
  MoeGating gating = MoeGating::kSoftmax;
};

// kMatMulId: the expert matmul. Inputs: x f32 [in_dim, T] (or [in_dim,
// n_used*T] with per_row_input), ids i32 [n_used, T]. The weight is a 3-D
// GGUF tensor [in_dim, out_dim, n_expert], each expert's [in_dim, out_dim]
// matrix contiguous; bias (optional) is [out_dim, n_expert]. Output f32
// [out_dim, n_used*T]: row t*n_used+j = (row t, or row t*n_used+j with
// per_row_input, of x) times expert ids[j, t]'s matrix (+ its bias row).
struct MatMulIdMeta {
  std::string weight;
  std::string bias;
  quant::TensorType weight_type = quant::TensorType::F32;
  int64_t in_dim = 0, out_dim = 0, n_expert = 0, n_used = 0;
  bool per_row_input = false;
  bool batch_invariant = false;
};

// kSwiGLUOai: inputs gate and up (same shape), out = min(gate, limit) *
// sigmoid(alpha * min(gate, limit)) * (clamp(up, -limit, limit) + 1), in f32.
struct GluMeta {
  float alpha = 1.702f;
  float limit = 7.0f;
};

// kMoeSum: inputs y f32 [d, n_used*T] and weights f32 [n_used, T]; output
// f32 [d, T], row t = (y[t*k] * w[0,t] + y[t*k+1] * w[1,t]) + ... in f32,
// each product rounded, summed in order of j.
struct MoeSumMeta {
  int64_t n_used = 0;
};

// kAllReduce and kAllGather: `ranks` ranks of one tensor-parallel group each
// run the node on their own part. AllReduce: input and output f32 of one
// shape, out = sum over ranks in rank order ((r0 + r1) + r2) + ..., the same
// bits on every rank. AllGather: input f32 [n, rows], output f32 [n * ranks,
// rows], output row i = rank 0's row i, then rank 1's, ... (a vocabulary
// split's logits put back in order).
struct CollectiveMeta {
  int ranks = 1;
};

using NodeMeta =
    std::variant<std::monostate, InputMeta, GetRowsMeta, RmsNormMeta, MatMulMeta, ScaleMeta,
                 RopeMeta, KvMeta, AttentionMeta, FusedQkvMeta, FusedFfnMeta, ArgMaxMeta,
                 MoeRouteMeta, MatMulIdMeta, MoeSumMeta, GluMeta, CollectiveMeta>;

struct Node {
  Op op = Op::kInput;
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<NodeId> inputs;
  NodeMeta meta;
  std::string name;  // for traces and errors: "blk.3.attn_q"
  int layer = -1;    // transformer layer, -1 outside the layer stack

  size_t bytes() const { return static_cast<size_t>(shape.elements()) * dtype_size(dtype); }
};

struct Graph {
  std::vector<Node> nodes;
  NodeId tokens = kNoNode;       // i32 [n_tokens]
  NodeId positions = kNoNode;    // i32 [n_tokens]
  NodeId cells = kNoNode;        // paged only (see InputKind)
  NodeId seq_slots = kNoNode;    // paged only
  NodeId page_table = kNoNode;   // paged only
  NodeId output_rows = kNoNode;  // paged only
  NodeId logits = kNoNode;       // f32 [n_vocab, n_outputs]

  // The input nodes the graph has (tokens and positions always).
  std::vector<NodeId> input_nodes() const {
    std::vector<NodeId> out;
    for (NodeId id : {tokens, positions, cells, seq_slots, page_table, output_rows}) {
      if (id != kNoNode) out.push_back(id);
    }
    return out;
  }

  NodeId add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<NodeId>(nodes.size() - 1);
  }
  const Node& at(NodeId id) const { return nodes[static_cast<size_t>(id)]; }
  Node& at(NodeId id) { return nodes[static_cast<size_t>(id)]; }
};

// The names of every weight the graph reads (for the all-weights gate).
std::vector<std::string> weights_read(const Graph& g);

}  // namespace minfer::graph
