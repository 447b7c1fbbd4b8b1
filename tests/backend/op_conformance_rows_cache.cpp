// The table's rows around the KV cache: rope, the KV store, attention
// (plain, paged, with a sliding window or sinks) and the decode fusion of
// the q, k and v projections (FusedQKV, FusedQkvNorm).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/op_conformance_rows.h"
#include "backend/reference_ops.h"
#include "quant/reference.h"

namespace minfer::conformance {
namespace {

using cpu::RopeMode;
using cpu::RopeYarn;
using cpu::testing::attention_ref;
using cpu::testing::matmul_ref;
using cpu::testing::rms_norm_ref;
using cpu::testing::rope_ref;
using graph::NodeId;
using graph::Op;
using quant::TensorType;

struct RopeSpec {
  RopeMode mode;
  int64_t heads, head_dim, n_rot, tokens;
  float base = 10000.0f, freq_scale = 1.0f;
  bool factors = false;
  RopeYarn yarn{};
};

graph::RopeMeta rope_meta(const RopeSpec& s, const std::string& factors) {
  graph::RopeMeta m;
  m.n_heads = s.heads;
  m.head_dim = s.head_dim;
  m.n_rot = s.n_rot;
  m.mode = s.mode == RopeMode::kNeox ? graph::RopeMode::kNeox : graph::RopeMode::kNormal;
  m.freq_base = s.base;
  m.freq_scale = s.freq_scale;
  m.freq_factors = factors;
  m.ext_factor = s.yarn.ext_factor;
  m.corr_low = s.yarn.corr_low;
  m.corr_high = s.yarn.corr_high;
  m.mscale = s.yarn.mscale;
  return m;
}

// f64 RoPE of [heads * head_dim, tokens] at `pos`.
std::vector<double> rope_rows(const std::vector<float>& x, const RopeSpec& s,
                              const std::vector<int32_t>& pos, const float* factors) {
  std::vector<double> out;
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const auto y = rope_ref(&x[(t * s.heads + h) * s.head_dim], s.head_dim, s.n_rot, pos[t],
                              s.base, s.freq_scale, factors, s.mode, s.yarn);
      out.insert(out.end(), y.begin(), y.end());
    }
  }
  return out;
}

// Positions far apart (the angle's f32 error grows with them), repeated, and
// 0 (no turn) not first, so that a one-token row turns.
std::vector<int32_t> spread_positions(int64_t n) {
  const int32_t some[] = {611, 0, 1, 17, 2047, 1, 300, 5, 1000};
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(some[i % 9]);
  return p;
}

Case rope_case(uint32_t seed, const RopeSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const int64_t width = s.heads * s.head_dim;
  const auto x = b.random(width * s.tokens, 2.0f);
  std::vector<float> factors;
  if (s.factors) {
    factors = b.random(s.n_rot / 2);
    for (float& f : factors) f = 1.0f + std::fabs(f);
    factors = b.weight("rope_freqs.weight", TensorType::F32, {s.n_rot / 2}, factors);
  }
  const auto pos = spread_positions(s.tokens);
  const NodeId p = b.input(graph::InputKind::kPositions, pos, s.tokens);
  const NodeId out = b.test(make_node(Op::kRope, width, s.tokens, {b.feed(width, x), p},
                                      rope_meta(s, s.factors ? "rope_freqs.weight" : "")));
  return b.finish(out, rope_rows(x, s, pos, s.factors ? factors.data() : nullptr));
}

struct CacheSpec {
  TensorType k_type, v_type;
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_past, tokens;
  int64_t window = 0;
  bool sinks = false;
  int64_t page_size = 0;      // > 0: a paged pool, one sequence, pages shuffled
  bool one_sequence = false;  // AttentionMeta's: key tiles shared across the batch
  bool invariant = false;     // AttentionMeta's batch_invariant
};

int64_t row_of(const CacheSpec& s) {
  return s.n_head_kv * s.head_dim;
}

// Cache rows: 4 pages of page_size when paged, else room for the positions
// and a few rows past them (which must stay as they were).
int64_t cache_rows(const CacheSpec& s) {
  return s.page_size > 0 ? 4 * s.page_size : s.n_past + s.tokens + 3;
}

// The cache row of position j: the page table {2, 0, 3, 1} when paged.
int64_t cell_of(const CacheSpec& s, int64_t j) {
  if (s.page_size == 0) return j;
  const int64_t pages[] = {2, 0, 3, 1};
  return pages[j / s.page_size] * s.page_size + j % s.page_size;
}

// The cache spec with random rows, and its graph inputs: positions (and when
// paged the cells, seq_slots and page table).
void add_cache(CaseBuilder& b, const CacheSpec& s) {
  KvSpec& kv = b.c().kv;
  kv.n_ctx = cache_rows(s);
  kv.n_head_kv = s.n_head_kv;
  kv.head_dim = s.head_dim;
  kv.k_type = s.k_type;
  kv.v_type = s.v_type;
  kv.k_init = b.random(kv.n_ctx * row_of(s));
  kv.v_init = b.random(kv.n_ctx * row_of(s));
  std::vector<int32_t> pos, cells;
  for (int64_t t = 0; t < s.tokens; ++t) {
    pos.push_back(static_cast<int32_t>(s.n_past + t));
    cells.push_back(static_cast<int32_t>(cell_of(s, s.n_past + t)));
  }
  b.input(graph::InputKind::kPositions, pos, s.tokens);
  if (s.page_size == 0) return;
  b.input(graph::InputKind::kCells, cells, s.tokens);
  b.input(graph::InputKind::kSeqSlots, std::vector<int32_t>(s.tokens, 0), s.tokens);
  b.input(graph::InputKind::kPageTable, {2, 0, 3, 1}, 4, 1);
}

graph::KvMeta kv_meta(const CacheSpec& s) {
  return {0, s.n_head_kv, s.head_dim, s.tokens, s.k_type, s.v_type, s.page_size};
}

// The cache after storing k and v ([row, tokens]) at the batch's cells, as
// each type holds the values; set as the case's wanted cache.
struct Stored {
  std::vector<float> k, v;  // by cache row
};

Stored store(Case& c, const CacheSpec& s, const std::vector<float>& k,
             const std::vector<float>& v) {
  const int64_t row = row_of(s);
  Stored out{round_trip(s.k_type, c.kv.k_init, row), round_trip(s.v_type, c.kv.v_init, row)};
  const auto ks = round_trip(s.k_type, k, row), vs = round_trip(s.v_type, v, row);
  for (int64_t t = 0; t < s.tokens; ++t) {
    const int64_t cell = cell_of(s, s.n_past + t);
    std::copy(ks.begin() + t * row, ks.begin() + (t + 1) * row, out.k.begin() + cell * row);
    std::copy(vs.begin() + t * row, vs.begin() + (t + 1) * row, out.v.begin() + cell * row);
  }
  c.want_k.assign(out.k.begin(), out.k.end());
  c.want_v.assign(out.v.begin(), out.v.end());
  return out;
}

// The store and the attention after it, as a layer builder makes them.
NodeId attend(CaseBuilder& b, const CacheSpec& s, NodeId q, NodeId k, NodeId v,
              const std::string& sinks) {
  const graph::Graph& g = b.c().graph;
  const bool paged = s.page_size > 0;
  const NodeId st =
      b.test(make_node(Op::kKvStore, 0, 0, {k, v, paged ? g.cells : g.positions}, kv_meta(s)));
  graph::AttentionMeta m;
  m.n_head = s.n_head;
  m.n_head_kv = s.n_head_kv;
  m.head_dim = s.head_dim;
  m.scale = 1.0f / std::sqrt(float(s.head_dim));
  m.sliding_window = s.window;
  m.sinks = sinks;
  m.k_type = s.k_type;
  m.v_type = s.v_type;
  m.page_size = s.page_size;
  m.max_pages = paged ? 4 : 0;
  m.one_sequence = s.one_sequence;
  m.batch_invariant = s.invariant;
  std::vector<NodeId> in = {q, st, g.positions, k, v};
  if (paged) in = {q, st, g.positions, g.seq_slots, g.page_table};
  return b.test(make_node(Op::kAttention, s.n_head * s.head_dim, s.tokens, in, m));
}

// The f64 attention of q over what the cache holds, by position.
std::vector<double> attention_want(const CacheSpec& s, const std::vector<float>& q,
                                   const Stored& cache, const float* sinks) {
  const int64_t row = row_of(s), n_kv = s.n_past + s.tokens;
  std::vector<float> k(static_cast<size_t>(n_kv * row)), v(k.size());
  for (int64_t j = 0; j < n_kv; ++j) {
    const int64_t cell = cell_of(s, j);
    std::copy(cache.k.begin() + cell * row, cache.k.begin() + (cell + 1) * row,
              k.begin() + j * row);
    std::copy(cache.v.begin() + cell * row, cache.v.begin() + (cell + 1) * row,
              v.begin() + j * row);
  }
  cpu::AttentionShape shape;
  shape.n_tokens = s.tokens;
  shape.n_kv = n_kv;
  shape.n_head = s.n_head;
  shape.n_head_kv = s.n_head_kv;
  shape.head_dim = s.head_dim;
  shape.scale = 1.0f / std::sqrt(float(s.head_dim));
  shape.sliding_window = s.window;
  shape.sinks = sinks;
  std::vector<int32_t> pos;
  for (int64_t t = 0; t < s.tokens; ++t) pos.push_back(static_cast<int32_t>(s.n_past + t));
  return attention_ref(q, k, v, pos, shape);
}

// KvStore alone: the wanted output is the cache.
Case kv_store_case(uint32_t seed, const CacheSpec& s) {
  CaseBuilder b(s.tokens, seed);
  add_cache(b, s);
  const auto k = b.random(row_of(s) * s.tokens), v = b.random(row_of(s) * s.tokens);
  const graph::Graph& g = b.c().graph;
  const NodeId kin = b.feed(row_of(s), k), vin = b.feed(row_of(s), v);
  b.test(make_node(Op::kKvStore, 0, 0, {kin, vin, s.page_size > 0 ? g.cells : g.positions},
                   kv_meta(s)));
  store(b.c(), s, k, v);
  return b.finish(graph::kNoNode, {});
}

Case attention_case(uint32_t seed, const CacheSpec& s) {
  CaseBuilder b(s.tokens, seed);
  add_cache(b, s);
  const auto q = b.random(s.n_head * s.head_dim * s.tokens);
  const auto k = b.random(row_of(s) * s.tokens), v = b.random(row_of(s) * s.tokens);
  std::vector<float> sinks;
  if (s.sinks)
    sinks = b.weight("blk.0.attn_sinks.weight", TensorType::F32, {s.n_head}, b.random(s.n_head));
  const NodeId qin = b.feed(s.n_head * s.head_dim, q);
  const NodeId kin = b.feed(row_of(s), k), vin = b.feed(row_of(s), v);
  const NodeId out = attend(b, s, qin, kin, vin, s.sinks ? "blk.0.attn_sinks.weight" : "");
  const Stored cache = store(b.c(), s, k, v);
  b.c().want_k.clear();  // the KV store rows check the cache
  b.c().want_v.clear();
  return b.finish(out, attention_want(s, q, cache, s.sinks ? sinks.data() : nullptr));
}

struct QkvSpec {
  TensorType type;  // of the q, k and v weights
  CacheSpec cache;
  int64_t in;
  RopeMode mode;
  bool bias = false, qk_norm = false, fold_norm = false;
};

// One projection of the chain: matmul (+ bias), then the per-head norm.
struct Head {
  NodeId node;
  std::vector<double> value;  // f64, before RoPE
};

Head project(CaseBuilder& b, const QkvSpec& s, NodeId norm, const std::vector<float>& xn,
             const std::string& which, int64_t heads) {
  const int64_t in = s.in, out = heads * s.cache.head_dim, tokens = s.cache.tokens;
  const std::string name = "blk.0.attn_" + which;
  graph::MatMulMeta m;
  m.weight = name + ".weight";
  m.bias = s.bias ? name + ".bias" : "";
  m.weight_type = s.type;
  m.in_dim = in;
  m.out_dim = out;
  const auto w = b.weight(m.weight, s.type, {in, out}, b.matrix(in, out));
  std::vector<float> bias;
  if (s.bias) bias = b.weight(m.bias, TensorType::F32, {out}, b.random(out));
  Head h{b.test(make_node(Op::kMatMul, out, tokens, {norm}, m)),
         matmul_ref(w.data(), xn.data(), s.bias ? bias.data() : nullptr, in, out, tokens)};
  if (!s.qk_norm || which == "v") return h;
  const std::string nw = name + "_norm.weight";
  const int64_t hd = s.cache.head_dim;
  const auto g = b.weight(nw, TensorType::F32, {hd}, b.norm_weights(hd));
  h.node =
      b.test(make_node(Op::kRmsNorm, out, tokens, {h.node}, graph::RmsNormMeta{nw, 1e-6f, hd}));
  const auto raw = narrow(h.value);
  h.value = rms_norm_ref(raw.data(), g.data(), tokens, out, 1e-6, hd);
  return h;
}

// RoPE of a projection, as node and in f64.
std::vector<float> turn(CaseBuilder& b, const QkvSpec& s, Head& h, int64_t heads) {
  const RopeSpec r{s.mode, heads, s.cache.head_dim, s.cache.head_dim, s.cache.tokens};
  h.node = b.test(make_node(Op::kRope, heads * r.head_dim, r.tokens,
                            {h.node, b.c().graph.positions}, rope_meta(r, "")));
  std::vector<int32_t> pos;
  for (int64_t t = 0; t < r.tokens; ++t) pos.push_back(static_cast<int32_t>(s.cache.n_past + t));
  return narrow(rope_rows(narrow(h.value), r, pos, nullptr));
}

// The attention block of a decoder layer from its input norm to the
// attention (q, k, v projections, per-head norms, RoPE, store), which the
// fusion pass turns into FusedQKV / FusedQkvNorm and a packed attention.
Case fused_qkv_case(uint32_t seed, const QkvSpec& s) {
  const CacheSpec& c = s.cache;
  CaseBuilder b(c.tokens, seed);
  add_cache(b, c);
  const auto nw = b.weight("blk.0.attn_norm.weight", TensorType::F32, {s.in}, b.norm_weights(s.in));
  const auto x = b.random(s.in * c.tokens, 2.0f);
  const NodeId norm = b.test(make_node(Op::kRmsNorm, s.in, c.tokens, {b.feed(s.in, x)},
                                       graph::RmsNormMeta{"blk.0.attn_norm.weight", 1e-6f, 0}));
  const auto xn = narrow(rms_norm_ref(x.data(), nw.data(), c.tokens, s.in, 1e-6));
  Head q = project(b, s, norm, xn, "q", c.n_head);
  Head k = project(b, s, norm, xn, "k", c.n_head_kv);
  const Head v = project(b, s, norm, xn, "v", c.n_head_kv);
  const auto qr = turn(b, s, q, c.n_head), kr = turn(b, s, k, c.n_head_kv);
  const NodeId out = attend(b, c, q.node, k.node, v.node, "");
  const Stored cache = store(b.c(), c, kr, narrow(v.value));
  Fusion f{s.qk_norm ? Op::kFusedQkvNorm : Op::kFusedQKV, s.fold_norm, {}};
  f.options.no_fuse_norm = !s.fold_norm;
  b.c().fusion = f;
  return b.finish(out, attention_want(c, qr, cache, nullptr));
}

std::string cache_name(const CacheSpec& s) {
  return std::string(quant::type_name(s.k_type)) + "/" + std::string(quant::type_name(s.v_type)) +
         " heads " + std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv) + " hd " +
         std::to_string(s.head_dim) + " past " + std::to_string(s.n_past) + " x" +
         std::to_string(s.tokens) + (s.window ? " window " + std::to_string(s.window) : "") +
         (s.sinks ? " sinks" : "") + (s.page_size ? " paged" : "") +
         (s.one_sequence ? " one sequence" : "") + (s.invariant ? " batch-invariant" : "");
}

// Attention over a cache of these types: f32 leaves f32 rounding; an f16 V
// is summed in f16 on the CPU's per-row path; a q8_0 K quantizes the query
// to 8-bit blocks there (backend/cpu/ops.h), as a matmul's activations.
Tolerance attention_tolerance(const CacheSpec& s) {
  if (s.k_type == TensorType::Q8_0 || s.v_type == TensorType::Q8_0) return rms(6e-2);
  if (s.k_type == TensorType::F16 || s.v_type == TensorType::F16) return rms(2e-2);
  return rms(1e-4);
}

// RoPE's angles are computed in f32 (their rounding grows with the
// position, to 2047 here); 2e-3 of the rms holds the CPU's and a GPU's.
void add_rope_rows(std::vector<Row>& rows) {
  const RopeYarn gpt_oss{1.0f, 8.0f, 18.0f, 1.3466f};
  const RopeSpec specs[] = {
      {RopeMode::kNormal, 3, 64, 64, 5},
      {RopeMode::kNeox, 3, 64, 64, 5},
      {RopeMode::kNeox, 2, 128, 64, 3, 1e6f, 0.5f},
      {RopeMode::kNormal, 4, 80, 20, 1},
      {RopeMode::kNeox, 2, 128, 128, 4, 5e5f, 1.0f, true},
      {RopeMode::kNormal, 1, 64, 32, 7, 1e4f, 1.0f, true},
      {RopeMode::kNeox, 2, 64, 64, 4, 150000.0f, 1.0f / 32.0f, false, gpt_oss},
  };
  for (const RopeSpec& s : specs) {
    rows.push_back({std::string("rope ") + (s.mode == RopeMode::kNeox ? "neox" : "normal") +
                        " heads " + std::to_string(s.heads) + " hd " + std::to_string(s.head_dim) +
                        " rot " + std::to_string(s.n_rot) + " x" + std::to_string(s.tokens) +
                        (s.factors ? " freq factors" : "") +
                        (s.yarn.ext_factor != 0.0f ? " yarn" : ""),
                    Op::kRope, rms(2e-3), [s](uint32_t seed) { return rope_case(seed, s); }});
  }
}

void add_store_and_attention_rows(std::vector<Row>& rows) {
  using T = TensorType;
  const CacheSpec stores[] = {
      {T::F32, T::F32, 2, 2, 64, 5, 1},   {T::F16, T::F16, 2, 2, 64, 3, 6},
      {T::Q8_0, T::Q8_0, 2, 2, 64, 0, 4}, {T::Q8_0, T::F16, 1, 1, 128, 7, 2},
      {T::F16, T::F32, 4, 4, 32, 2, 3},   {T::F16, T::F16, 2, 2, 64, 3, 5, 0, false, 4},
  };
  // Exact: every type's encoding is the reference quantizer's.
  for (const CacheSpec& s : stores) {
    rows.push_back({"kv_store " + cache_name(s), Op::kKvStore, ulps(0),
                    [s](uint32_t seed) { return kv_store_case(seed, s); }});
  }
  const CacheSpec attentions[] = {
      {T::F32, T::F32, 4, 4, 64, 0, 5},
      {T::F16, T::F16, 8, 2, 64, 37, 1},
      {T::F16, T::F16, 14, 2, 128, 11, 3},
      {T::Q8_0, T::Q8_0, 8, 2, 64, 20, 1},
      {T::Q8_0, T::F16, 4, 1, 128, 9, 2},
      {T::F16, T::Q8_0, 8, 4, 64, 15, 2},
      {T::F32, T::F32, 4, 2, 80, 6, 3},
      {T::F16, T::F16, 4, 2, 64, 30, 4, 8},
      {T::F16, T::F16, 4, 1, 64, 0, 64},
      {T::F32, T::F32, 8, 2, 128, 10, 33},
      {T::Q8_0, T::Q8_0, 4, 2, 64, 3, 40},
      {T::F16, T::F16, 4, 2, 64, 5, 3, 0, false, 4},
      {T::F32, T::F32, 4, 2, 64, 6, 3, 0, true},
      {T::F16, T::F16, 8, 2, 64, 12, 1, 0, true},
      {T::F16, T::F16, 4, 2, 64, 5, 36, 0, false, 16, true},
      {T::F16, T::F16, 4, 2, 64, 3, 40, 0, false, 0, false, true},
  };
  for (const CacheSpec& s : attentions) {
    rows.push_back({"attention " + cache_name(s), Op::kAttention, attention_tolerance(s),
                    [s](uint32_t seed) { return attention_case(seed, s); }});
  }
}

// The projections' error and the attention's over the cache, added.
Tolerance qkv_tolerance(const QkvSpec& s) {
  return rms(product_tolerance(s.type).limit + attention_tolerance(s.cache).limit);
}

void add_fused_qkv_rows(std::vector<Row>& rows) {
  using T = TensorType;
  const QkvSpec specs[] = {
      {T::Q8_0, {T::F16, T::F16, 4, 2, 64, 5, 1}, 256, RopeMode::kNeox, true},
      {T::Q4_K, {T::F16, T::F16, 4, 2, 64, 5, 1}, 256, RopeMode::kNeox, false, true},
      {T::Q8_0, {T::F32, T::F32, 4, 2, 64, 3, 1}, 256, RopeMode::kNeox, true, false, true},
      {T::F16, {T::Q8_0, T::Q8_0, 2, 1, 64, 4, 1}, 128, RopeMode::kNormal, true},
      {T::Q4_K, {T::F16, T::F16, 4, 2, 64, 2, 4}, 256, RopeMode::kNeox, true},
  };
  for (const QkvSpec& s : specs) {
    rows.push_back({std::string(s.qk_norm ? "fused_qkv_norm " : "fused_qkv ") +
                        std::string(quant::type_name(s.type)) + " in " + std::to_string(s.in) +
                        (s.bias ? " bias" : "") + (s.fold_norm ? " +norm" : "") + ", " +
                        cache_name(s.cache),
                    s.qk_norm ? Op::kFusedQkvNorm : Op::kFusedQKV, qkv_tolerance(s),
                    [s](uint32_t seed) { return fused_qkv_case(seed, s); }});
  }
}

}  // namespace

void add_cache_rows(std::vector<Row>& rows) {
  add_rope_rows(rows);
  add_store_and_attention_rows(rows);
  add_fused_qkv_rows(rows);
}

}  // namespace minfer::conformance
