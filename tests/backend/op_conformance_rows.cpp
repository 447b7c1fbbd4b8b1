// The table's dense rows: get_rows, rms_norm, the matmuls and their
// fusions, the element-wise ops and argmax.
#include "backend/op_conformance_rows.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/reference_ops.h"
#include "quant/reference.h"

namespace minfer::conformance {
namespace {

using cpu::testing::gelu_ref;
using cpu::testing::matmul_ref;
using cpu::testing::rms_norm_ref;
using cpu::testing::silu_ref;
using cpu::testing::swiglu_oai_ref;
using graph::NodeId;
using graph::Op;
using quant::TensorType;

std::string shape(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

// Rows `ids` of a [width, 9] table of `type` (an embedding lookup), times scale.
Case get_rows_weight(uint32_t seed, TensorType type, int64_t width, float scale) {
  const std::vector<int32_t> ids = {3, 0, 8, 3, 5};
  const auto n = static_cast<int64_t>(ids.size());
  CaseBuilder b(n, seed);
  b.c().tokens = ids;  // the gather's ids are the token ids, as for an embedding
  const auto table = b.weight("token_embd.weight", type, {width, 9}, b.random(width * 9));
  const NodeId out = b.test(make_node(Op::kGetRows, width, n, {b.c().graph.tokens},
                                      graph::GetRowsMeta{"token_embd.weight", {}, scale}));
  std::vector<double> want;
  for (int32_t id : ids) {
    for (int64_t i = 0; i < width; ++i) want.push_back(table[id * width + i] * scale);
  }
  return b.finish(out, want);
}

// Rows of an activation, picked by the node's list or by an i32 input.
Case get_rows_activation(uint32_t seed, bool by_input) {
  const int64_t width = 37, rows = 6;
  const std::vector<int32_t> pick = {5, 0, 2, 2, 4};
  const auto n = static_cast<int64_t>(pick.size());
  CaseBuilder b(rows, seed);
  const auto x = b.random(width * rows);
  const NodeId in = b.feed(width, x);
  graph::Node node =
      by_input
          ? make_node(Op::kGetRows, width, n, {in, b.input(graph::InputKind::kOutputRows, pick, n)},
                      graph::GetRowsMeta{})
          : make_node(Op::kGetRows, width, n, {in}, graph::GetRowsMeta{"", pick, 1.0f});
  std::vector<double> want;
  for (int32_t r : pick)
    want.insert(want.end(), x.begin() + r * width, x.begin() + (r + 1) * width);
  return b.finish(b.test(std::move(node)), want);
}

Case rms_norm_case(uint32_t seed, int64_t dim, int64_t rows, bool weighted, int64_t group) {
  const float eps = 1e-5f;
  CaseBuilder b(rows, seed);
  const auto x = b.random(dim * rows, 3.0f);
  const int64_t len = group > 0 ? group : dim;
  const std::string name = weighted ? "blk.0.attn_norm.weight" : "";
  std::vector<float> w;
  if (weighted) w = b.weight(name, TensorType::F32, {len}, b.norm_weights(len));
  const NodeId out = b.test(
      make_node(Op::kRmsNorm, dim, rows, {b.feed(dim, x)}, graph::RmsNormMeta{name, eps, group}));
  return b.finish(out,
                  rms_norm_ref(x.data(), weighted ? w.data() : nullptr, rows, dim, eps, group));
}

struct MatMulSpec {
  TensorType type;
  int64_t in, out, tokens;
  bool bias = false, invariant = false;
};

graph::MatMulMeta matmul_meta(const std::string& weight, const std::string& bias,
                              const MatMulSpec& s) {
  graph::MatMulMeta m;
  m.weight = weight;
  m.bias = bias;
  m.weight_type = s.type;
  m.in_dim = s.in;
  m.out_dim = s.out;
  m.batch_invariant = s.invariant;
  return m;
}

// The matmul's weight (and bias) and the f64 product of `x` with them.
struct Projection {
  graph::MatMulMeta meta;
  std::vector<float> w, bias;
  std::vector<double> times(const std::vector<float>& x, int64_t tokens) const {
    return matmul_ref(w.data(), x.data(), bias.empty() ? nullptr : bias.data(), meta.in_dim,
                      meta.out_dim, tokens);
  }
};

Projection projection(CaseBuilder& b, const std::string& name, const MatMulSpec& s) {
  Projection p{matmul_meta(name + ".weight", s.bias ? name + ".bias" : "", s), {}, {}};
  p.w = b.weight(p.meta.weight, s.type, {s.in, s.out}, b.matrix(s.in, s.out));
  if (s.bias) p.bias = b.weight(p.meta.bias, TensorType::F32, {s.out}, b.random(s.out));
  return p;
}

Case matmul_case(uint32_t seed, const MatMulSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const Projection p = projection(b, "blk.0.ffn_down", s);
  const auto x = b.random(s.in * s.tokens);
  const NodeId out = b.test(make_node(Op::kMatMul, s.out, s.tokens, {b.feed(s.in, x)}, p.meta));
  return b.finish(out, p.times(x, s.tokens));
}

// MatMul then Add of a residual: fused into MatMulAdd.
Case matmul_add_case(uint32_t seed, const MatMulSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const Projection p = projection(b, "blk.0.attn_output", s);
  const auto x = b.random(s.in * s.tokens), r = b.random(s.out * s.tokens);
  const NodeId residual = b.feed(s.out, r);
  const NodeId mm = b.test(make_node(Op::kMatMul, s.out, s.tokens, {b.feed(s.in, x)}, p.meta));
  const NodeId out = b.test(make_node(Op::kAdd, s.out, s.tokens, {residual, mm}));
  std::vector<double> want = p.times(x, s.tokens);
  for (size_t i = 0; i < want.size(); ++i) want[i] += r[i];
  b.c().fusion = Fusion{Op::kMatMulAdd, false, {}};
  return b.finish(out, want);
}

// RmsNorm then MatMul: the norm folded into the matmul (in_norm).
Case norm_matmul_case(uint32_t seed, const MatMulSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const Projection p = projection(b, "blk.0.attn_q", s);
  const auto nw = b.weight("blk.0.attn_norm.weight", TensorType::F32, {s.in}, b.norm_weights(s.in));
  const auto x = b.random(s.in * s.tokens, 2.0f);
  const NodeId norm = b.test(make_node(Op::kRmsNorm, s.in, s.tokens, {b.feed(s.in, x)},
                                       graph::RmsNormMeta{"blk.0.attn_norm.weight", 1e-6f, 0}));
  const NodeId out = b.test(make_node(Op::kMatMul, s.out, s.tokens, {norm}, p.meta));
  const auto xn = narrow(rms_norm_ref(x.data(), nw.data(), s.tokens, s.in, 1e-6));
  b.c().fusion = Fusion{Op::kMatMul, true, {}};
  return b.finish(out, p.times(xn, s.tokens));
}

struct FfnSpec {
  TensorType type;
  int64_t in, n_ff, tokens;
  bool gelu = false, fold_norm = false;
};

// RmsNorm, gate and up matmuls, Mul(act(gate), up): fused into FusedFFN
// (through SwiGLU/GeGLU), with the norm folded in when fold_norm.
Case fused_ffn_case(uint32_t seed, const FfnSpec& s) {
  CaseBuilder b(s.tokens, seed);
  const MatMulSpec mm{s.type, s.in, s.n_ff, s.tokens};
  const Projection gate = projection(b, "blk.0.ffn_gate", mm),
                   up = projection(b, "blk.0.ffn_up", mm);
  const auto nw = b.weight("blk.0.ffn_norm.weight", TensorType::F32, {s.in}, b.norm_weights(s.in));
  const auto x = b.random(s.in * s.tokens, 2.0f);
  const NodeId norm = b.test(make_node(Op::kRmsNorm, s.in, s.tokens, {b.feed(s.in, x)},
                                       graph::RmsNormMeta{"blk.0.ffn_norm.weight", 1e-6f, 0}));
  const NodeId g = b.test(make_node(Op::kMatMul, s.n_ff, s.tokens, {norm}, gate.meta));
  const NodeId u = b.test(make_node(Op::kMatMul, s.n_ff, s.tokens, {norm}, up.meta));
  const NodeId act = b.test(make_node(s.gelu ? Op::kGelu : Op::kSilu, s.n_ff, s.tokens, {g}));
  const NodeId out = b.test(make_node(Op::kMul, s.n_ff, s.tokens, {act, u}));
  const auto xn = narrow(rms_norm_ref(x.data(), nw.data(), s.tokens, s.in, 1e-6));
  std::vector<double> want = gate.times(xn, s.tokens);
  const std::vector<double> upv = up.times(xn, s.tokens);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = (s.gelu ? gelu_ref(want[i]) : silu_ref(want[i])) * upv[i];
  }
  Fusion f{Op::kFusedFFN, s.fold_norm, {}};
  f.options.no_fuse_norm = !s.fold_norm;
  b.c().fusion = f;
  return b.finish(out, want);
}

// The element-wise ops' value at (a, b) in double.
double elementwise_ref(Op op, double a, double b) {
  switch (op) {
    case Op::kAdd:
      return a + b;
    case Op::kMul:
      return a * b;
    case Op::kScale:
      return a * double(0.37f);
    case Op::kSilu:
      return silu_ref(a);
    case Op::kGelu:
      return gelu_ref(a);
    case Op::kSwiGLU:
      return silu_ref(a) * b;
    case Op::kGeGLU:
      return gelu_ref(a) * b;
    case Op::kSwiGLUOai:
      return swiglu_oai_ref(a, b, 1.702, 7.0);
    default:
      return NAN;
  }
}

graph::NodeMeta elementwise_meta(Op op) {
  if (op == Op::kScale) return graph::ScaleMeta{0.37f};
  if (op == Op::kSwiGLUOai) return graph::GluMeta{1.702f, 7.0f};
  return {};
}

// op over [width, rows]; in_place: input 0 is the output of a node under
// test that dies there (a Scale by 1), so the plan gives the op its buffer.
Case elementwise_case(uint32_t seed, Op op, int64_t width, int64_t rows, bool in_place) {
  const bool binary = op == Op::kAdd || op == Op::kMul || op == Op::kSwiGLU || op == Op::kGeGLU ||
                      op == Op::kSwiGLUOai;
  CaseBuilder b(rows, seed);
  // Scale 4: past the clamps of swiglu_oai (7) and the tables of gelu (10).
  const auto x = b.random(width * rows, 4.0f), y = b.random(width * rows, 4.0f);
  NodeId a = b.feed(width, x);
  if (in_place) a = b.test(make_node(Op::kScale, width, rows, {a}, graph::ScaleMeta{1.0f}));
  std::vector<NodeId> inputs = {a};
  if (binary) inputs.push_back(b.feed(width, y));
  const NodeId out = b.test(make_node(op, width, rows, inputs, elementwise_meta(op)));
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = elementwise_ref(op, x[i], y[i]);
  return b.finish(out, want);
}

// Rows exercising each rule of argmax: a unique maximum, ties (the first),
// NaN (never), only -inf or NaN (-1), two +inf (the first), one finite last.
Case argmax_case(uint32_t seed, int64_t width) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const auto w = static_cast<size_t>(width);
  CaseBuilder b(7, seed);
  std::vector<float> x = b.random(width);
  std::vector<float> r(w, 1.0f);
  r[w / 3] = r[w - 1] = 5.0f;
  x.insert(x.end(), r.begin(), r.end());
  r.assign(w, -2.0f);
  r[0] = r[w / 2] = std::nanf("");
  r[w - 2] = -1.0f;
  x.insert(x.end(), r.begin(), r.end());
  x.insert(x.end(), w, -kInf);
  x.insert(x.end(), w, std::nanf(""));
  r.assign(w, 3.0f);
  r[w / 4] = r[w / 2] = kInf;
  x.insert(x.end(), r.begin(), r.end());
  r.assign(w, -kInf);
  r[w - 1] = -1e30f;
  x.insert(x.end(), r.begin(), r.end());
  const NodeId out = b.test(make_node(Op::kArgMax, 1, 7, {b.feed(width, x)},
                                      graph::ArgMaxMeta{width}, graph::DType::kI32));
  const auto ids = cpu::testing::argmax_ref(x.data(), 7, width);
  return b.finish(out, std::vector<double>(ids.begin(), ids.end()));
}

void add_matmul_rows(std::vector<Row>& rows) {
  auto add = [&](const std::string& what, MatMulSpec s) {
    rows.push_back({"mul_mat " + std::string(quant::type_name(s.type)) + " " + shape(s.in, s.out) +
                        " x" + std::to_string(s.tokens) + what,
                    Op::kMatMul, product_tolerance(s.type),
                    [s](uint32_t seed) { return matmul_case(seed, s); }});
  };
  // Every weight type: one token (the GEMV paths) and an odd batch.
  for (TensorType t : weight_types()) {
    for (int64_t tokens : {1, 7}) add("", {t, 256, 37, tokens});
  }
  // The tiled GEMMs (64 tokens or more, a partial tile of rows).
  for (TensorType t :
       {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::F16}) {
    add("", {t, 256, 260, 64});
  }
  add(" bias", {TensorType::Q8_0, 512, 45, 3, true});
  add(" batch-invariant", {TensorType::Q4_K, 256, 37, 9, false, true});
  add(" batch-invariant", {TensorType::Q4_K, 256, 260, 64, false, true});  // not the GEMM
  add(" odd row", {TensorType::F32, 37, 19, 3});
  add(" odd row, bias", {TensorType::F16, 50, 21, 2, true});
}

void add_fused_matmul_rows(std::vector<Row>& rows) {
  for (auto [type, tokens] : {std::pair{TensorType::Q8_0, int64_t{1}}, {TensorType::Q4_K, 6}}) {
    const MatMulSpec s{type, 256, 70, tokens, tokens == 1};
    const std::string what = std::string(quant::type_name(type)) + " " + shape(s.in, s.out) + " x" +
                             std::to_string(tokens);
    rows.push_back({"mul_mat_add " + what, Op::kMatMulAdd, product_tolerance(type),
                    [s](uint32_t seed) { return matmul_add_case(seed, s); }});
    rows.push_back({"mul_mat+norm " + what, Op::kMatMul, product_tolerance(type),
                    [s](uint32_t seed) { return norm_matmul_case(seed, s); }});
  }
  const FfnSpec ffn[] = {{TensorType::Q4_K, 256, 96, 1},
                         {TensorType::Q8_0, 256, 50, 5, true},
                         {TensorType::F16, 128, 64, 1, false, true},
                         {TensorType::Q6_K, 256, 40, 1, true, true}};
  for (const FfnSpec& s : ffn) {
    rows.push_back({std::string("fused_ffn ") + (s.gelu ? "geglu " : "swiglu ") +
                        std::string(quant::type_name(s.type)) + " " + shape(s.in, s.n_ff) + " x" +
                        std::to_string(s.tokens) + (s.fold_norm ? " +norm" : ""),
                    Op::kFusedFFN, glu_tolerance(s.type),
                    [s](uint32_t seed) { return fused_ffn_case(seed, s); }});
  }
}

// A collective over a group of one rank (the tensor-parallel split's
// all-reduce and all-gather with nothing to combine): the input, bit for bit.
// More ranks: tests/runtime/tensor_parallel_test.cpp.
Case collective_case(uint32_t seed, Op op, int64_t width, int64_t rows) {
  CaseBuilder b(rows, seed);
  const auto x = b.random(width * rows);
  const NodeId out =
      b.test(make_node(op, width, rows, {b.feed(width, x)}, graph::CollectiveMeta{1}));
  return b.finish(out, std::vector<double>(x.begin(), x.end()));
}

void add_collective_rows(std::vector<Row>& rows) {
  for (Op op : {Op::kAllReduce, Op::kAllGather}) {
    rows.push_back({std::string(graph::op_name(op)) + " one rank " + shape(300, 3), op, ulps(0),
                    [op](uint32_t seed) { return collective_case(seed, op, 300, 3); }});
  }
}

void add_elementwise_rows(std::vector<Row>& rows) {
  // Exact ops are bit-equal; silu and swiglu_oai within expf's rounding; gelu
  // is a table of f16 values on the CPU (ops.h), so within f16 rounding.
  const std::pair<Op, Tolerance> ops[] = {{Op::kAdd, ulps(0)},     {Op::kMul, ulps(0)},
                                          {Op::kScale, ulps(0)},   {Op::kSilu, rms(1e-5)},
                                          {Op::kGelu, rms(4e-3)},  {Op::kSwiGLU, rms(1e-5)},
                                          {Op::kGeGLU, rms(4e-3)}, {Op::kSwiGLUOai, rms(1e-5)}};
  for (const auto& [op, tol] : ops) {
    for (auto [width, n, in_place] :
         {std::tuple{int64_t{37}, int64_t{1}, false}, std::tuple{int64_t{1003}, int64_t{5}, false},
          std::tuple{int64_t{64}, int64_t{3}, true}}) {
      // Copies: a lambda may not capture structured bindings before C++20's
      // compilers all allow it (clang 14 does not).
      const Op o = op;
      const int64_t w = width, rows_n = n;
      const bool place = in_place;
      rows.push_back(
          {std::string(graph::op_name(op)) + " " + shape(w, rows_n) + (place ? " in place" : ""),
           op, tol, [o, w, rows_n, place](uint32_t seed) {
             return elementwise_case(seed, o, w, rows_n, place);
           }});
    }
  }
}

void add_table_rows(std::vector<Row>& rows) {
  // Dequantizing is a few f32 operations per value in the order of
  // quant/reference.h (every decoder's contract): every backend gives the
  // reference's bits, so a contracted multiply-add shows here as an ulp.
  for (TensorType t : weight_types()) {
    rows.push_back({"get_rows " + std::string(quant::type_name(t)) + " 256", Op::kGetRows, ulps(0),
                    [t](uint32_t seed) { return get_rows_weight(seed, t, 256, 1.0f); }});
  }
  rows.push_back({"get_rows F16 96 scaled", Op::kGetRows, ulps(0),
                  [](uint32_t seed) { return get_rows_weight(seed, TensorType::F16, 96, 2.5f); }});
  rows.push_back({"get_rows F32 37", Op::kGetRows, ulps(0),
                  [](uint32_t seed) { return get_rows_weight(seed, TensorType::F32, 37, 1.0f); }});
  rows.push_back({"get_rows activation by list", Op::kGetRows, ulps(0),
                  [](uint32_t seed) { return get_rows_activation(seed, false); }});
  rows.push_back({"get_rows activation by ids", Op::kGetRows, ulps(0),
                  [](uint32_t seed) { return get_rows_activation(seed, true); }});
  for (int64_t width : {37, 5003}) {
    rows.push_back({"argmax " + shape(width, 7), Op::kArgMax, ulps(0),
                    [width](uint32_t seed) { return argmax_case(seed, width); }});
  }
}

void add_norm_rows(std::vector<Row>& rows) {
  struct Spec {
    int64_t dim, rows;
    bool weighted;
    int64_t group;
  };
  for (const Spec& s : {Spec{17, 1, true, 0}, Spec{896, 7, true, 0}, Spec{1003, 3, false, 0},
                        Spec{256, 5, true, 64}}) {
    rows.push_back({"rms_norm " + shape(s.dim, s.rows) + (s.weighted ? "" : " no weight") +
                        (s.group ? " group " + std::to_string(s.group) : ""),
                    Op::kRmsNorm, rms(1e-5), [s](uint32_t seed) {
                      return rms_norm_case(seed, s.dim, s.rows, s.weighted, s.group);
                    }});
  }
}

}  // namespace

// The tolerance of a product over weights of `type`. The CPU rounds the
// activations to the type's vec_dot_type (F32 stays; F16 and BF16 round to
// 11 and 8 bits; the quantized types to 8-bit blocks of 32 or 256 values,
// whose step is the block's largest value over 127) and the GPUs each their
// own way (docs/ARCHITECTURE.md, "Contracts" 7); the limits hold a row's
// worst output with headroom (the census prints each row's share).
Tolerance product_tolerance(TensorType type) {
  switch (type) {
    case TensorType::F32:
      return rms(1e-5);
    case TensorType::F16:
      return rms(4e-3);
    case TensorType::BF16:
      return rms(1.5e-2);
    default:
      return rms(6e-2);
  }
}

// act(gate) * up multiplies two products: each one's error counts.
Tolerance glu_tolerance(TensorType type) {
  Tolerance t = product_tolerance(type);
  t.limit *= 2.0;
  return t;
}

std::vector<TensorType> weight_types() {
  std::vector<TensorType> out;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const quant::TypeTraits* t = quant::find_type_traits(raw);
    if (t != nullptr && quant::is_weight_type(t->type)) out.push_back(t->type);
  }
  return out;
}

void add_dense_rows(std::vector<Row>& rows) {
  add_table_rows(rows);
  add_norm_rows(rows);
  add_matmul_rows(rows);
  add_fused_matmul_rows(rows);
  add_elementwise_rows(rows);
  add_collective_rows(rows);
}

const std::vector<Row>& conformance_rows() {
  static const std::vector<Row> kRows = [] {
    std::vector<Row> rows;
    add_dense_rows(rows);
    add_cache_rows(rows);
    add_moe_rows(rows);
    return rows;
  }();
  return kRows;
}

}  // namespace minfer::conformance
