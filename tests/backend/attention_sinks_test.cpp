// Attention sinks on the CPU (AttentionShape::sinks in backend/cpu/ops.h and
// the kAttention node's sink weight) against a double-precision reference
// written from docs/GPT_OSS.md "Attention sinks": every path (per-row, tiled,
// tiled reading the batch's own rows), f32, f16 and q8_0 caches, full and
// windowed, paged; rows alone equal to rows in a batch, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/attention_testutil.h"
#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/ops.h"
#include "graph/ir.h"
#include "model/weights.h"

namespace minfer::cpu {
namespace {

using testing::kv_type_name;
using testing::KvRegion;
using testing::make_kv_region;
using testing::random_floats;

constexpr int64_t kHeads = 8, kHeadsKv = 2, kHeadDim = 64;
constexpr int64_t kKvRow = kHeadsKv * kHeadDim, kQRow = kHeads * kHeadDim;

// One logit per head: far above every score (|scores| stay below ~8 with the
// data below), far below every score, and some among the scores, so that
// both branches of the fold (sink above or below the running max) run.
const std::vector<float> kSinks = {40.0f, -40.0f, 0.0f, 1.5f, -1.0f, 3.0f, 0.5f, -2.5f};

// The reference: per (token, head), z_j = scale * q.k_j over the visible
// keys, m = max(max_j z_j, s), p_j = exp(z_j - m) / (sum_j exp(z_j - m) +
// exp(s - m)), out = sum_j p_j v_j, all in double. `mag` is sum_j p_j |v_j|
// per element (the tolerance's unit) and `weight` sum_j p_j per (token, head).
struct Reference {
  std::vector<double> out, mag, weight;
};

// row_of(t, j): the k/v row holding position j for token t.
using RowOf = std::function<int64_t(int64_t t, int64_t j)>;

void reference_head(const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, int64_t t, int64_t h, int64_t pos,
                    const AttentionShape& s, const RowOf& row_of, Reference& ref) {
  const int64_t d = s.head_dim, kvh = h / (s.n_head / s.n_head_kv);
  std::vector<std::pair<int64_t, double>> z;
  for (int64_t j = 0; j <= pos && j < s.n_kv; ++j) {
    if (s.sliding_window > 0 && pos - j >= s.sliding_window) continue;
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      dot +=
          double(q[(t * s.n_head + h) * d + i]) * k[row_of(t, j) * s.n_head_kv * d + kvh * d + i];
    }
    z.emplace_back(j, double(s.scale) * dot);
  }
  double m = s.sinks != nullptr ? double(s.sinks[h]) : -INFINITY;
  for (auto& [j, zj] : z) m = std::max(m, zj);
  double denom = s.sinks != nullptr ? std::exp(double(s.sinks[h]) - m) : 0.0;
  for (auto& [j, zj] : z) denom += std::exp(zj - m);
  const int64_t o = (t * s.n_head + h) * d;
  for (auto& [j, zj] : z) {
    const double p = std::exp(zj - m) / denom;
    ref.weight[t * s.n_head + h] += p;
    for (int64_t i = 0; i < d; ++i) {
      const double vi = v[row_of(t, j) * s.n_head_kv * d + kvh * d + i];
      ref.out[o + i] += p * vi;
      ref.mag[o + i] += p * std::fabs(vi);
    }
  }
}

Reference reference(const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<int32_t>& pos,
                    const AttentionShape& s, const RowOf& row_of) {
  Reference ref{std::vector<double>(q.size()), std::vector<double>(q.size()),
                std::vector<double>(static_cast<size_t>(s.n_tokens * s.n_head))};
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) reference_head(q, k, v, t, h, pos[t], s, row_of, ref);
  }
  return ref;
}

// max_i |out_i - ref_i| / mag_i: the error relative to the size the weighted
// sum can have (which bounds |out| and scales f32 rounding), so that rows a
// dominant sink shrinks to ~1e-16 are held to the same relative standard. An
// element with mag 0 (no visible key) must be exactly 0.
double worst_relative(const std::vector<float>& out, const Reference& ref) {
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double diff = std::fabs(double(out[i]) - ref.out[i]);
    if (ref.mag[i] == 0.0) {
      if (diff != 0.0) return INFINITY;
      continue;
    }
    worst = std::max(worst, diff / ref.mag[i]);
  }
  return worst;
}

struct Case {
  KvType k, v;
  bool per_row;
  int64_t window;
  bool paged = false;
  bool batch_rows = false;  // tiled: keys of the batch's positions from batch_k/v
};

std::string describe(const Case& c) {
  return std::string("K ") + kv_type_name(c.k) + " V " + kv_type_name(c.v) +
         (c.per_row ? " per-row" : " tiled") + " window " + std::to_string(c.window) +
         (c.paged ? " paged" : "") + (c.batch_rows ? " batch rows" : "");
}

// A batch of six queries. Unpaged: positions 40..45 over a 46-row cache.
// Paged: two sequences interleaved (positions 38..40 and 20..22) in a pool
// of 8 pages of 16 rows, each sequence's pages scattered through it.
struct Batch {
  AttentionShape shape;
  std::vector<float> q;
  std::vector<int32_t> pos, slots, table;
  std::vector<float> k_exact, v_exact, batch_k, batch_v;
  KvRegion k, v;
};

Batch make_batch(const Case& c, const float* sinks) {
  Batch st;
  AttentionShape& s = st.shape;
  s.n_tokens = 6;
  s.n_head = kHeads;
  s.n_head_kv = kHeadsKv;
  s.head_dim = kHeadDim;
  s.scale = 0.125f;
  s.sliding_window = c.window;
  s.per_row = c.per_row;
  s.sinks = sinks;
  st.q = random_floats(s.n_tokens * kQRow, 11, 1.5f);
  int64_t rows = 46;
  if (c.paged) {
    st.pos = {38, 20, 39, 21, 40, 22};
    st.slots = {0, 1, 0, 1, 0, 1};
    st.table = {5, 2, 7, 0, 1, 6, 3, 0};  // 2 slots of 4 pages
    s.n_kv = 41;
    s.seq_slots = st.slots.data();
    s.page_table = st.table.data();
    s.page_size = 16;
    s.max_pages = 4;
    rows = 8 * 16;
  } else {
    st.pos = {40, 41, 42, 43, 44, 45};
    s.n_kv = 46;
  }
  st.k_exact = random_floats(rows * kKvRow, 12);
  st.v_exact = random_floats(rows * kKvRow, 13);
  st.k = make_kv_region(st.k_exact, c.k);
  st.v = make_kv_region(st.v_exact, c.v);
  if (c.batch_rows) {
    st.batch_k = random_floats(s.n_tokens * kKvRow, 14);
    st.batch_v = random_floats(s.n_tokens * kKvRow, 15);
    s.batch_k = st.batch_k.data();
    s.batch_v = st.batch_v.data();
    s.batch_first = st.pos[0];
  }
  return st;
}

RowOf row_of(const Batch& st) {
  if (st.shape.page_table == nullptr) return [](int64_t, int64_t j) { return j; };
  return [&st](int64_t t, int64_t j) {
    const int32_t* row = st.shape.page_table + st.shape.seq_slots[t] * st.shape.max_pages;
    return int64_t{row[j / st.shape.page_size]} * st.shape.page_size + j % st.shape.page_size;
  };
}

std::vector<float> run(const Batch& st, const Case& c, const AttentionShape& s, const float* q,
                       const int32_t* pos, ThreadPool& pool) {
  std::vector<float> out(static_cast<size_t>(s.n_tokens * kQRow), NAN);
  const Status status =
      attention(q, st.k.bytes.data(), c.k, st.v.bytes.data(), c.v, pos, s, out.data(), pool);
  EXPECT_TRUE(status.is_ok()) << status.message();
  return out;
}

// What the reference must see: the cache's stored values (the batch's own
// rows where the kernel reads those) and the query in K's dot type on the
// per-row path (f16-rounded, or Q8_0 blocks whose integer dot is exact).
Reference reference_for(const Batch& st, const Case& c) {
  std::vector<float> q = st.q;
  if (c.per_row && c.k != KvType::kF32) q = make_kv_region(st.q, c.k).seen;
  std::vector<float> k = st.k.seen, v = st.v.seen;
  if (c.batch_rows) {
    std::copy(st.batch_k.begin(), st.batch_k.end(), k.begin() + st.shape.batch_first * kKvRow);
    std::copy(st.batch_v.begin(), st.batch_v.end(), v.begin() + st.shape.batch_first * kKvRow);
  }
  return reference(q, k, v, st.pos, st.shape, row_of(st));
}

// The tolerance on worst_relative: f32 rounding of scores, exps and sums
// (measured worst ~1e-6), except a per-row f16 V, whose running sum is
// itself rounded to f16 at each key (llama.cpp's numerics; its sink fold is
// checked separately to 1e-5 in F16RunningSumIsWidenedBeforeTheFold).
double tolerance(const Case& c) {
  return c.per_row && c.v == KvType::kF16 ? 2e-2 : 1e-5;
}

void check_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  const Batch st = make_batch(c, kSinks.data());
  ThreadPool pool(3);
  const std::vector<float> out = run(st, c, st.shape, st.q.data(), st.pos.data(), pool);
  const Reference ref = reference_for(st, c);
  EXPECT_LE(worst_relative(out, ref), tolerance(c));
  // The sinks matter: the far-above one leaves almost no weight to the keys.
  EXPECT_LT(ref.weight[0], 1e-12);
  EXPECT_GT(ref.weight[1], 1.0 - 1e-12);
  if (c.batch_rows) return;  // a lone row would read its earlier keys from the cache
  // Each row alone (one query, one thread) equals it in the batch, bit for bit.
  ThreadPool one(1);
  for (int64_t t = 0; t < st.shape.n_tokens; ++t) {
    AttentionShape alone = st.shape;
    alone.n_tokens = 1;
    alone.n_kv = st.pos[t] + 1;
    if (c.paged) alone.seq_slots = st.slots.data() + t;
    const std::vector<float> row =
        run(st, c, alone, st.q.data() + t * kQRow, st.pos.data() + t, one);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), out.begin() + t * kQRow)) << "token " << t;
  }
}

const std::vector<std::pair<KvType, KvType>> kPerRowTypes = {
    {KvType::kF32, KvType::kF32}, {KvType::kF16, KvType::kF16},  {KvType::kQ8_0, KvType::kQ8_0},
    {KvType::kF16, KvType::kF32}, {KvType::kQ8_0, KvType::kF32}, {KvType::kF32, KvType::kQ8_0},
};

TEST(cpu_AttentionSinks, PerRowMatchesDoubleReference) {
  for (auto [k, v] : kPerRowTypes) {
    for (int64_t window : {0, 16}) {
      check_case({k, v, true, window});
      check_case({k, v, true, window, /*paged=*/true});
    }
  }
}

TEST(cpu_AttentionSinks, TiledMatchesDoubleReference) {
  for (KvType t : {KvType::kF32, KvType::kF16}) {
    for (int64_t window : {0, 16}) {
      check_case({t, t, false, window});
      check_case({t, t, false, window, /*paged=*/true});
      check_case({t, t, false, window, /*paged=*/false, /*batch_rows=*/true});
    }
  }
}

// The per-row path keeps an f16 V's running sum in f16 but widens it before
// the sink's rescale: the key loop is the same with and without a sink, so
// out(sink) = out(no sink) * W exactly in real arithmetic, W = the keys'
// total weight (Z / (Z + e^s), from the reference), and only f32 rounding of
// a few scalar operations separates them.
TEST(cpu_AttentionSinks, F16RunningSumIsWidenedBeforeTheFold) {
  for (int64_t window : {0, 16}) {
    const Case c{KvType::kF16, KvType::kF16, true, window};
    SCOPED_TRACE(describe(c));
    const Batch with = make_batch(c, kSinks.data());
    const Batch without = make_batch(c, nullptr);
    ThreadPool pool(2);
    const auto a = run(with, c, with.shape, with.q.data(), with.pos.data(), pool);
    const auto b = run(without, c, without.shape, without.q.data(), without.pos.data(), pool);
    const Reference ref = reference_for(with, c);
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double expect = double(b[i]) * ref.weight[i / kHeadDim];
      if (expect == 0.0) {
        EXPECT_EQ(a[i], 0.0f);
        continue;
      }
      worst = std::max(worst, std::fabs(a[i] - expect) / std::fabs(expect));
    }
    EXPECT_LE(worst, 1e-5);
  }
}

// No visible key at all: zeros, with or without sinks (the sink alone gives 0).
TEST(cpu_AttentionSinks, NoKeysGiveZeros) {
  for (bool per_row : {true, false}) {
    const Case c{KvType::kF32, KvType::kF32, per_row, 0};
    Batch st = make_batch(c, kSinks.data());
    st.shape.n_kv = 0;
    ThreadPool pool(2);
    const auto out = run(st, c, st.shape, st.q.data(), st.pos.data(), pool);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; }));
  }
}

// A sink of -inf adds exp(-inf) = 0 to the sum: the result is the no-sink one,
// bit for bit, on both paths and every cache type.
TEST(cpu_AttentionSinks, MinusInfinitySinkChangesNothing) {
  const std::vector<float> none(kHeads, -INFINITY);
  for (auto [k, v] : kPerRowTypes) {
    for (bool per_row : {true, false}) {
      if (!per_row && (k != v || k == KvType::kQ8_0)) continue;
      const Case c{k, v, per_row, 16};
      SCOPED_TRACE(describe(c));
      const Batch a = make_batch(c, none.data());
      const Batch b = make_batch(c, nullptr);
      ThreadPool pool(2);
      EXPECT_EQ(run(a, c, a.shape, a.q.data(), a.pos.data(), pool),
                run(b, c, b.shape, b.q.data(), b.pos.data(), pool));
    }
  }
}

std::vector<uint8_t> bytes_of(const std::vector<float>& x) {
  std::vector<uint8_t> b(x.size() * sizeof(float));
  std::memcpy(b.data(), x.data(), b.size());
  return b;
}

graph::Node attention_node(const std::string& sinks) {
  graph::AttentionMeta m;
  m.n_head = kHeads;
  m.n_head_kv = kHeadsKv;
  m.head_dim = kHeadDim;
  m.scale = 0.125f;
  m.sinks = sinks;
  graph::Node n;
  n.op = graph::Op::kAttention;
  n.shape.ne = {kQRow, 6};
  n.inputs = {0, 1, 2};
  n.meta = m;
  n.name = "blk.0.attn";
  return n;
}

// The backend takes a node with sinks only when the weight is f32 [n_head].
TEST(cpu_AttentionSinks, BackendChecksTheSinkWeight) {
  model::Weights w;
  ASSERT_TRUE(w.add_derived("sinks", quant::TensorType::F32, {kHeads}, bytes_of(kSinks)).is_ok());
  ASSERT_TRUE(w.add_derived("short", quant::TensorType::F32, {kHeads - 1},
                            bytes_of(std::vector<float>(kHeads - 1)))
                  .is_ok());
  ASSERT_TRUE(
      w.add_derived("half", quant::TensorType::F16, {kHeads}, std::vector<uint8_t>(kHeads * 2))
          .is_ok());
  CpuBackend cpu(w, 1);
  EXPECT_TRUE(cpu.supports_op(attention_node("")));
  EXPECT_TRUE(cpu.supports_op(attention_node("sinks")));
  EXPECT_FALSE(cpu.supports_op(attention_node("missing")));
  EXPECT_FALSE(cpu.supports_op(attention_node("short")));
  EXPECT_FALSE(cpu.supports_op(attention_node("half")));
}

// Writes host data into a new buffer of the backend.
backend::BufferId upload(CpuBackend& cpu, const void* data, size_t bytes) {
  Result<backend::BufferId> id = cpu.alloc_buffer(bytes);
  EXPECT_TRUE(id.is_ok());
  const auto* p = static_cast<const std::byte*>(data);
  EXPECT_TRUE(cpu.write_host(*id, 0, {p, bytes}).is_ok());
  return *id;
}

// The node passes its sink weight to the kernel: the backend's result is the
// kernel's with AttentionShape::sinks set (decode-sized batch: per-row path).
TEST(cpu_AttentionSinks, BackendPassesTheSinks) {
  model::Weights w;
  ASSERT_TRUE(w.add_derived("sinks", quant::TensorType::F32, {kHeads}, bytes_of(kSinks)).is_ok());
  CpuBackend cpu(w, 2);
  const Case c{KvType::kF16, KvType::kF16, true, 0};
  const Batch st = make_batch(c, kSinks.data());
  backend::KvPair kv{upload(cpu, st.k.bytes.data(), st.k.bytes.size()),
                     upload(cpu, st.v.bytes.data(), st.v.bytes.size()), quant::TensorType::F16,
                     quant::TensorType::F16, st.shape.n_kv};
  const backend::BufferId q = upload(cpu, st.q.data(), st.q.size() * sizeof(float));
  const backend::BufferId pos = upload(cpu, st.pos.data(), st.pos.size() * sizeof(int32_t));
  const graph::Node node = attention_node("sinks");
  Result<backend::BufferId> out = cpu.alloc_buffer(node.bytes());
  ASSERT_TRUE(out.is_ok());
  const std::vector<backend::BufferId> inputs = {q, backend::kNoBuffer, pos};
  const Status s = cpu.execute_node(node, inputs, *out, &kv);
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<float> got(st.q.size());
  ASSERT_TRUE(cpu.read_host(*out, 0, std::as_writable_bytes(std::span(got))).is_ok());
  ThreadPool pool(1);
  EXPECT_EQ(got, run(st, c, st.shape, st.q.data(), st.pos.data(), pool));
}

}  // namespace
}  // namespace minfer::cpu
