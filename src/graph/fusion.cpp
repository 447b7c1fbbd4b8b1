#include "graph/fusion.h"

#include <cstdlib>
#include <initializer_list>
#include <optional>

namespace minfer::graph {
namespace {

backend::Backend* first_supporting(const Node& n, std::span<backend::Backend* const> backends) {
  for (auto* b : backends) {
    if (b->supports_op(n)) return b;
  }
  return nullptr;
}

std::vector<int> count_users(const Graph& g) {
  std::vector<int> users(g.nodes.size(), 0);
  for (const auto& n : g.nodes) {
    for (NodeId in : n.inputs) users[static_cast<size_t>(in)]++;
  }
  return users;
}

// The backend that runs every node in `nodes` and claims `fused`, or null.
backend::Backend* common_backend(const Graph& g, std::initializer_list<NodeId> nodes, Op fused,
                                 std::span<backend::Backend* const> backends) {
  backend::Backend* b = nullptr;
  for (NodeId id : nodes) {
    backend::Backend* nb = first_supporting(g.at(id), backends);
    if (nb == nullptr || (b != nullptr && nb != b)) return nullptr;
    b = nb;
  }
  return b != nullptr && b->supports_fused(fused) ? b : nullptr;
}

const MatMulMeta* matmul_of(const Graph& g, NodeId id, NodeId x) {
  const Node& n = g.at(id);
  if (n.op != Op::kMatMul || n.inputs.size() != 1 || n.inputs[0] != x) return nullptr;
  return std::get_if<MatMulMeta>(&n.meta);
}

// SwiGLU/GeGLU(MatMul(x, gate), MatMul(x, up)) -> FusedFFN(x).
int fuse_ffn(Graph& g, std::span<backend::Backend* const> backends, const std::vector<int>& users) {
  int fused = 0;
  for (auto& n : g.nodes) {
    if ((n.op != Op::kSwiGLU && n.op != Op::kGeGLU) || n.inputs.size() != 2) continue;
    const NodeId gate = n.inputs[0], up = n.inputs[1];
    if (users[gate] != 1 || users[up] != 1 || g.at(gate).op != Op::kMatMul) continue;
    const NodeId x = g.at(gate).inputs.empty() ? kNoNode : g.at(gate).inputs[0];
    const MatMulMeta* mg = matmul_of(g, gate, x);
    const MatMulMeta* mu = matmul_of(g, up, x);
    if (mg == nullptr || mu == nullptr || !mg->bias.empty() || !mu->bias.empty()) continue;
    backend::Backend* b = common_backend(g, {gate, up, x}, Op::kFusedFFN, backends);
    if (b == nullptr) continue;
    Node candidate = n;
    candidate.op = Op::kFusedFFN;
    candidate.inputs = {x};
    candidate.meta = FusedFfnMeta{mg->weight,
                                  mu->weight,
                                  n.op == Op::kGeGLU,
                                  mg->in_dim,
                                  mg->out_dim,
                                  {},
                                  mg->batch_invariant && mu->batch_invariant};
    if (!b->supports_op(candidate)) continue;
    n = std::move(candidate);
    ++fused;
  }
  return fused;
}

// Add(r, MatMul(x)) or Add(MatMul(x), r), the matmul used only there ->
// MatMulAdd(x, r).
int fuse_matmul_add(Graph& g, std::span<backend::Backend* const> backends,
                    const std::vector<int>& users) {
  int fused = 0;
  for (auto& n : g.nodes) {
    if (n.op != Op::kAdd || n.inputs.size() != 2) continue;
    const int which = g.at(n.inputs[1]).op == Op::kMatMul   ? 1
                      : g.at(n.inputs[0]).op == Op::kMatMul ? 0
                                                            : -1;
    if (which < 0) continue;
    const NodeId mm = n.inputs[static_cast<size_t>(which)];
    const NodeId r = n.inputs[static_cast<size_t>(1 - which)];
    if (users[mm] != 1 || g.at(mm).inputs.size() != 1) continue;
    backend::Backend* b =
        common_backend(g, {mm, static_cast<NodeId>(&n - g.nodes.data())}, Op::kMatMulAdd, backends);
    if (b == nullptr) continue;
    Node candidate = g.at(mm);
    candidate.op = Op::kMatMulAdd;
    candidate.inputs = {g.at(mm).inputs[0], r};
    candidate.name = n.name;
    if (!b->supports_op(candidate)) continue;
    n = std::move(candidate);
    ++fused;
  }
  return fused;
}

// One projection chain: MatMul(x) [-> per-head RmsNorm] [-> Rope].
struct Projection {
  const MatMulMeta* matmul = nullptr;
  const RmsNormMeta* norm = nullptr;
  const RopeMeta* rope = nullptr;
  NodeId x = kNoNode;
};

Projection projection(const Graph& g, NodeId id, bool roped) {
  Projection p;
  if (roped) {
    if (g.at(id).op != Op::kRope) return {};
    p.rope = std::get_if<RopeMeta>(&g.at(id).meta);
    id = g.at(id).inputs[0];
  }
  if (g.at(id).op == Op::kRmsNorm) {
    p.norm = std::get_if<RmsNormMeta>(&g.at(id).meta);
    if (p.norm == nullptr || p.norm->group <= 0) return {};
    id = g.at(id).inputs[0];
  }
  const Node& mm = g.at(id);
  if (mm.op != Op::kMatMul || mm.inputs.size() != 1) return {};
  p.matmul = std::get_if<MatMulMeta>(&mm.meta);
  p.x = mm.inputs[0];
  return p;
}

// The q, k, v, store and positions nodes an attention node reads, in both
// layouts: (q, store, pos, k, v) with the store at the positions, or paged
// (q, store, pos, seq_slots, page_table) with the store's k and v at cells.
struct AttentionOperands {
  NodeId q = kNoNode, store = kNoNode, pos = kNoNode, k = kNoNode, v = kNoNode;
  bool paged = false;
};

std::optional<AttentionOperands> attention_operands(const Graph& g, const Node& attn) {
  if (attn.op != Op::kAttention || attn.inputs.size() < 5) return std::nullopt;
  AttentionOperands o;
  o.q = attn.inputs[0];
  o.store = attn.inputs[1];
  o.pos = attn.inputs[2];
  o.paged = std::get<AttentionMeta>(attn.meta).page_size > 0;
  const Node& st = g.at(o.store);
  if (st.op != Op::kKvStore || st.inputs.size() != 3) return std::nullopt;
  o.k = st.inputs[0];
  o.v = st.inputs[1];
  if (!o.paged && (attn.inputs.size() != 5 || attn.inputs[3] != o.k || attn.inputs[4] != o.v ||
                   st.inputs[2] != o.pos)) {
    return std::nullopt;
  }
  // A paged one-sequence batch's own k and v (inputs 5 and 6) are the store's.
  if (o.paged && attn.inputs.size() != 5 &&
      (attn.inputs.size() != 7 || attn.inputs[5] != o.k || attn.inputs[6] != o.v)) {
    return std::nullopt;
  }
  return o;
}

// Whether a Rope node turns its input at `pos` (RoPE reads the positions).
bool ropes_at(const Graph& g, NodeId rope, NodeId pos) {
  const Node& r = g.at(rope);
  return r.inputs.size() == 2 && r.inputs[1] == pos;
}

// Attention(Rope(q), KvStore(Rope(k), v, at), pos, ...) over projections of
// one x -> Attention(FusedQKV(x, pos[, cells]), pos[, seq_slots, page_table])
// with packed q|k|v rows. Batch-invariant matmuls fuse only into a
// batch-invariant FusedQKV (the backend then keeps one arithmetic per token).
int fuse_qkv(Graph& g, std::span<backend::Backend* const> backends, const Options& options) {
  const bool no_qkv = options.no_fuse_qkv;
  const bool no_norm = no_qkv || options.no_fuse_qkv_norm;
  int fused = 0;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    const std::optional<AttentionOperands> o = attention_operands(g, g.nodes[ai]);
    if (!o || !ropes_at(g, o->q, o->pos) || !ropes_at(g, o->k, o->pos)) continue;
    const Projection q = projection(g, o->q, true), k = projection(g, o->k, true);
    const Projection v = projection(g, o->v, false);
    if (q.matmul == nullptr || k.matmul == nullptr || v.matmul == nullptr || v.norm != nullptr ||
        q.x != k.x || q.x != v.x || (q.norm == nullptr) != (k.norm == nullptr) ||
        q.matmul->batch_invariant != k.matmul->batch_invariant ||
        q.matmul->batch_invariant != v.matmul->batch_invariant) {
      continue;
    }
    const bool with_norm = q.norm != nullptr;
    if (with_norm ? no_norm : no_qkv) continue;
    const Op op = with_norm ? Op::kFusedQkvNorm : Op::kFusedQKV;
    backend::Backend* b =
        common_backend(g, {o->q, o->k, o->v, o->store, static_cast<NodeId>(ai)}, op, backends);
    if (b == nullptr) continue;
    const Node& attn = g.nodes[ai];
    const Node& st = g.at(o->store);
    const auto& am = std::get<AttentionMeta>(attn.meta);
    FusedQkvMeta m;
    m.q_weight = q.matmul->weight;
    m.k_weight = k.matmul->weight;
    m.v_weight = v.matmul->weight;
    m.q_bias = q.matmul->bias;
    m.k_bias = k.matmul->bias;
    m.v_bias = v.matmul->bias;
    if (with_norm) {
      m.q_norm = q.norm->weight;
      m.k_norm = k.norm->weight;
      m.norm_eps = q.norm->eps;
    }
    m.in_dim = q.matmul->in_dim;
    m.rope = *q.rope;
    m.kv = std::get<KvMeta>(st.meta);
    m.n_head = am.n_head;
    m.batch_invariant = q.matmul->batch_invariant;
    Node fq = st;  // takes the store's place: after every node it replaces
    fq.op = op;
    fq.dtype = DType::kF32;
    fq.shape = {
        {q.matmul->out_dim + k.matmul->out_dim + v.matmul->out_dim, g.at(o->q).shape.ne[1]}};
    fq.inputs = {q.x, o->pos};
    if (o->paged) fq.inputs.push_back(st.inputs[2]);  // the cells
    fq.meta = m;
    fq.name = attn.name + ".qkv";
    Node fa = attn;
    fa.inputs = {o->store, o->pos};
    if (o->paged) fa.inputs.insert(fa.inputs.end(), {attn.inputs[3], attn.inputs[4]});
    std::get<AttentionMeta>(fa.meta).packed_qkv = true;
    if (!b->supports_op(fq) || !b->supports_op(fa)) continue;
    g.at(o->store) = std::move(fq);
    g.nodes[ai] = std::move(fa);
    ++fused;
  }
  return fused;
}

InputNorm* input_norm_of(Node& n) {
  if (auto* q = std::get_if<FusedQkvMeta>(&n.meta)) return &q->in_norm;
  if (auto* f = std::get_if<FusedFfnMeta>(&n.meta)) return &f->in_norm;
  if (n.op == Op::kMatMul || n.op == Op::kMatMulAdd) {
    if (auto* m = std::get_if<MatMulMeta>(&n.meta)) return &m->in_norm;
  }
  return nullptr;
}

// The nodes reading `norm`, each as its input 0 only and able to hold an
// input norm not yet set; empty unless every user of `norm` is one.
std::vector<NodeId> norm_users(Graph& g, NodeId norm, int n_users) {
  std::vector<NodeId> found;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    bool reads = false, only_first = true;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] != norm) continue;
      reads = true;
      only_first = only_first && k == 0;
    }
    if (!reads) continue;
    const InputNorm* in_norm = input_norm_of(n);
    if (!only_first || in_norm == nullptr || in_norm->on) return {};
    found.push_back(static_cast<NodeId>(i));
  }
  return static_cast<int>(found.size()) == n_users ? found : std::vector<NodeId>{};
}

// Fused nodes (FusedQKV, FusedFFN) and matmuls over RmsNorm(x), a whole-row
// norm read by nothing else -> each reads x with the norm folded in
// (in_norm). The q, k and v matmuls of a layer share one norm: each takes
// it, and the backend normalizes once where it can (the CUDA backend's
// quantized-activation reuse).
int fuse_input_norm(Graph& g, std::span<backend::Backend* const> backends,
                    const std::vector<int>& users) {
  int fused = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& norm = g.nodes[ni];
    const auto* nm = std::get_if<RmsNormMeta>(&norm.meta);
    if (norm.op != Op::kRmsNorm || nm == nullptr || nm->group != 0 || norm.inputs.size() != 1 ||
        users[ni] < 1) {
      continue;
    }
    const auto id = static_cast<NodeId>(ni);
    const std::vector<NodeId> readers = norm_users(g, id, users[ni]);
    if (readers.empty()) continue;
    std::vector<Node> candidates;
    for (NodeId r : readers) {
      backend::Backend* b = common_backend(g, {id, r}, Op::kRmsNorm, backends);
      if (b == nullptr) break;
      Node candidate = g.at(r);
      candidate.inputs[0] = norm.inputs[0];
      *input_norm_of(candidate) = InputNorm{true, nm->weight, nm->eps};
      if (!b->supports_op(candidate)) break;
      candidates.push_back(std::move(candidate));
    }
    if (candidates.size() != readers.size()) continue;
    for (size_t k = 0; k < readers.size(); ++k) g.at(readers[k]) = std::move(candidates[k]);
    fused += static_cast<int>(readers.size());
  }
  return fused;
}

}  // namespace

void remove_dead_nodes(Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  auto mark = [&](NodeId id) {
    if (id != kNoNode) live[static_cast<size_t>(id)] = true;
  };
  for (NodeId in : g.input_nodes()) mark(in);
  mark(g.logits);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (op_traits(n.op).writes_kv) live[i] = true;  // side effect on the cache
    if (!live[i]) continue;
    for (NodeId in : n.inputs) live[static_cast<size_t>(in)] = true;
  }
  std::vector<NodeId> remap(g.nodes.size(), kNoNode);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<NodeId>(kept.size());
    kept.push_back(std::move(g.nodes[i]));
  }
  for (auto& n : kept) {
    for (NodeId& in : n.inputs) in = remap[static_cast<size_t>(in)];
  }
  auto re = [&](NodeId id) { return id == kNoNode ? kNoNode : remap[static_cast<size_t>(id)]; };
  for (NodeId* id : {&g.tokens, &g.positions, &g.cells, &g.seq_slots, &g.page_table, &g.output_rows,
                     &g.logits}) {
    *id = re(*id);
  }
  g.nodes = std::move(kept);
}

int fuse(Graph& g, std::span<backend::Backend* const> backends, const Options& options) {
  int fused = 0;
  if (!options.no_fuse_glu) {
    const std::vector<int> users = count_users(g);
    for (auto& n : g.nodes) {
      if (n.op != Op::kMul || n.inputs.size() != 2) continue;
      const Node& act = g.at(n.inputs[0]);
      if ((act.op != Op::kSilu && act.op != Op::kGelu) || users[n.inputs[0]] != 1) continue;
      const Op fused_op = act.op == Op::kSilu ? Op::kSwiGLU : Op::kGeGLU;
      backend::Backend* b = first_supporting(n, backends);
      if (b == nullptr || b != first_supporting(act, backends) || !b->supports_fused(fused_op)) {
        continue;
      }
      Node candidate = n;
      candidate.op = fused_op;
      candidate.inputs = {act.inputs[0], n.inputs[1]};
      if (!b->supports_op(candidate)) continue;
      n = std::move(candidate);
      ++fused;
    }
    if (fused > 0) remove_dead_nodes(g);
    if (!options.no_fuse_ffn) {
      const int n_ffn = fuse_ffn(g, backends, count_users(g));
      if (n_ffn > 0) remove_dead_nodes(g);
      fused += n_ffn;
    }
  }
  if (!options.no_fuse_add) {
    const int n_add = fuse_matmul_add(g, backends, count_users(g));
    if (n_add > 0) remove_dead_nodes(g);
    fused += n_add;
  }
  const int n_qkv = fuse_qkv(g, backends, options);
  if (n_qkv > 0) remove_dead_nodes(g);
  fused += n_qkv;
  if (!options.no_fuse_norm) {
    const int n_norm = fuse_input_norm(g, backends, count_users(g));
    if (n_norm > 0) remove_dead_nodes(g);
    fused += n_norm;
  }
  return fused;
}

}  // namespace minfer::graph
