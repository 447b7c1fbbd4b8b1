// The CUDA backend's GEMVs on int8 activations (gemv_q8.cu), for every type
// they take (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K), through MatMul, MatMulAdd, FusedFFN
// and FusedQKV nodes (the stacked q|k|v GEMV, one type or Q4_K / Q5_K with a
// Q6_K v), with and without the folded input RMSNorm; one token, and batches whose
// every token must equal its own one-token run bit for bit. One Q6_K token
// takes the staged path (q8_units.cuh): the shapes cross its steps (8 or 4
// super-blocks per row, partial last steps, R = 1 and 4 rows per warp).
//
// Two checks per output:
//   - against a host emulation of the int8 path: x quantized per 32 values
//     exactly as the kernel does (d = amax / 127, q = round-half-even(x *
//     (127 / amax)) in f32; amax over 256 values where the K-quants' tensor-core
//     products take them), then sum of w * d * q in double with the
//     reference-dequantized weights. The GPU sums in f32 with integer partial
//     dots: |got - emulated| <= 1e-5 * sum |w * x^| + 1e-6.
//   - against the exact f32 dot in double, within the rounding bound of the
//     activation: |got - exact| <= sum over blocks of d / 2 * sum |w| (times
//     1.01, plus 1e-5), which any indexing or scaling error breaks.
// With the input norm, x is first normalized on the host (in double), and only
// the second (bound) check applies, the bound computed from the normalized x.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cuda_testutil.h"
#include "backend/q8_emulation.h"

namespace minfer::cuda::testing {
namespace {

struct Expect {
  double exact = 0, emulated = 0, bound = 0, scale = 0;
};

// Row r of w against x: the exact dot, the emulated int8 dot and the bound.
Expect expect_row(const std::vector<float>& w, int64_t in, int64_t r, const std::vector<float>& x,
                  const Quantized& q) {
  Expect e;
  for (int64_t b = 0; b < in / 32; ++b) {
    double abs_w = 0;
    for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
      const double wi = w[r * in + i];
      e.exact += wi * double(x[i]);
      e.emulated += wi * q.value[i];
      e.scale += std::fabs(wi * q.value[i]);
      abs_w += std::fabs(wi);
    }
    e.bound += double(q.d[b]) / 2 * abs_w;
  }
  e.bound = e.bound * 1.01 + 1e-5;
  return e;
}

class GemvF32Off {  // the int8 path on (the default), whatever the environment says
 public:
  GemvF32Off() {
    if (const char* v = std::getenv("MINFER_GEMV_F32")) saved_ = v;
    unsetenv("MINFER_GEMV_F32");
  }
  ~GemvF32Off() {
    if (!saved_.empty()) setenv("MINFER_GEMV_F32", saved_.c_str(), 1);
  }

 private:
  std::string saved_;
};

std::vector<float> rms_normalized(const std::vector<float>& x, const std::vector<float>& w,
                                  float eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double s = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * s * w[i]);
  return y;
}

// The types the int8 paths take, and whether one of them cannot have rows
// of in values (K-quants: whole super-blocks).
const TensorType kQ8Types[] = {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K,
                               TensorType::Q5_K, TensorType::Q6_K};
bool rows_unfit(TensorType type, int64_t in) {
  return in % quant::type_traits(type).block_size != 0;
}

// The worst of a set of outputs (the bias and residual `base` added), as
// fractions of the emulation's tolerance and of the rounding bound.
struct Worst {
  double emu = 0, bound = 0;
  void add(double got, double base, const Expect& e) {
    emu = std::max(
        emu, std::fabs(got - base - e.emulated) / (1e-5 * e.scale + 1e-6 + 1e-7 * std::fabs(base)));
    bound = std::max(bound, std::fabs(got - base - e.exact) / e.bound);
  }
};

TEST(cuda_GemvQ8, MatMulAndResidualMatchEmulationAndBound) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  struct Shape {
    int64_t in, out;
  };
  for (TensorType type : kQ8Types) {
    for (const Shape& sh : {Shape{896, 160}, Shape{3584, 4200}, Shape{1024, 16500},
                            Shape{3584, 8195}, Shape{18944, 64}, Shape{256, 5}, Shape{4864, 33}}) {
      if (rows_unfit(type, sh.in)) continue;
      model::Weights weights;
      add_weight(weights, "w", type, sh.out, sh.in, random_floats(sh.in * sh.out, 41));
      add_weight(weights, "b", TensorType::F32, 1, sh.out, random_floats(sh.out, 42));
      auto gpu = create_backend(weights, env_options());
      ASSERT_TRUE(gpu.is_ok()) << gpu.message();
      const std::vector<float> w = dequantized(weights, "w");
      const std::vector<float> bias = random_floats(sh.out, 42);
      const auto x = random_floats(sh.in, 43, 1.0f / std::sqrt(float(sh.in)));
      const auto res = random_floats(sh.out, 44);
      const Quantized q = quantize_like_gpu(x);
      for (bool residual : {false, true}) {
        Node n;
        n.op = residual ? Op::kMatMulAdd : Op::kMatMul;
        n.shape.ne = {sh.out, 1};
        n.name = "test.gemv_q8";
        n.inputs = residual ? std::vector<graph::NodeId>{0, 1} : std::vector<graph::NodeId>{0};
        n.meta = graph::MatMulMeta{"w", "b", type, sh.in, sh.out};
        ASSERT_TRUE((*gpu)->supports_op(n));
        auto got = residual ? run_node(**gpu, n, {bytes_of(x), bytes_of(res)})
                            : run_node(**gpu, n, {bytes_of(x)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        Worst worst;
        for (int64_t r = 0; r < sh.out; ++r) {
          worst.add((*got)[r], bias[r] + (residual ? res[r] : 0.0), expect_row(w, sh.in, r, x, q));
        }
        std::printf("  q8 %-5s in %5lld out %5lld residual %d: emulation %.2f, bound %.2f\n",
                    std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                    static_cast<long long>(sh.out), int(residual), worst.emu, worst.bound);
        EXPECT_LE(worst.emu, 1.0) << quant::type_name(type) << " in " << sh.in;
        EXPECT_LE(worst.bound, 1.0) << quant::type_name(type) << " in " << sh.in;
      }
    }
  }
}

TEST(cuda_GemvQ8, FusedFfnWithInputNormWithinTheRoundingBound) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  struct Shape {
    int64_t in, n_ff;
  };
  for (TensorType type : kQ8Types) {
    for (const Shape& sh : {Shape{896, 4864}, Shape{1024, 301}}) {
      if (rows_unfit(type, sh.in)) continue;
      model::Weights weights;
      add_weight(weights, "gate", type, sh.n_ff, sh.in, random_floats(sh.in * sh.n_ff, 51));
      add_weight(weights, "up", type, sh.n_ff, sh.in, random_floats(sh.in * sh.n_ff, 52));
      const auto norm_w = random_floats(sh.in, 53);
      add_weight(weights, "norm", TensorType::F32, 1, sh.in, norm_w);
      auto gpu = create_backend(weights, env_options());
      ASSERT_TRUE(gpu.is_ok()) << gpu.message();
      const std::vector<float> wg = dequantized(weights, "gate");
      const std::vector<float> wu = dequantized(weights, "up");
      const auto x_raw = random_floats(sh.in, 54, 3.0f);
      for (bool with_norm : {false, true}) {
        for (bool gelu : {false, true}) {
          const float eps = 1e-6f;
          std::vector<float> x = x_raw;
          if (with_norm) {
            x = rms_normalized(x_raw, norm_w, eps);
          } else {
            for (float& v : x) v /= std::sqrt(float(sh.in));
          }
          Node n;
          n.op = Op::kFusedFFN;
          n.shape.ne = {sh.n_ff, 1};
          n.name = "test.ffn_q8";
          n.inputs = {0};
          graph::FusedFfnMeta m{"gate", "up", gelu, sh.in, sh.n_ff, {}};
          if (with_norm) m.in_norm = graph::InputNorm{true, "norm", eps};
          n.meta = m;
          ASSERT_TRUE((*gpu)->supports_op(n));
          auto got = run_node(**gpu, n, {bytes_of(with_norm ? x_raw : x)});
          ASSERT_TRUE(got.is_ok()) << got.message();
          const Quantized q = quantize_like_gpu(x);
          double worst = 0;
          for (int64_t r = 0; r < sh.n_ff; ++r) {
            const Expect eg = expect_row(wg, sh.in, r, x, q);
            const Expect eu = expect_row(wu, sh.in, r, x, q);
            // act(g) * u moves by at most |act'| * dg * |u| + |act(g)| * du +
            // dg * du, with |act'| <= 1.13 for SiLU and GELU; the norm's f32
            // arithmetic adds 1e-5 relative.
            const double dg = eg.bound + 1e-5 * std::fabs(eg.exact);
            const double du = eu.bound + 1e-5 * std::fabs(eu.exact);
            const double g = eg.exact, u = eu.exact;
            const double act =
                gelu ? 0.5 * g * (1 + std::tanh(0.7978845608 * (g + 0.044715 * g * g * g)))
                     : g / (1 + std::exp(-g));
            const double tol = 1.13 * dg * (std::fabs(u) + du) + std::fabs(act) * du + 1e-5;
            worst = std::max(worst, std::fabs((*got)[r] - act * u) / tol);
          }
          std::printf("  ffn q8 %-5s in %4lld n_ff %4lld norm %d gelu %d: bound %.2f\n",
                      std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                      static_cast<long long>(sh.n_ff), int(with_norm), int(gelu), worst);
          EXPECT_LE(worst, 1.0) << quant::type_name(type);
        }
      }
    }
  }
}

// FusedQKV on the int8 path: q, k, v stacked in one GEMV launch, of one type
// or Q4_K / Q5_K q/k with a Q6_K v (the layers of a Q4_K_M / Q5_K_M file
// whose attn_v is Q6_K). At position 0 RoPE is the identity, so the packed
// [q | k | v] output is the three GEMVs' rows, checked against the int8 emulation as above
// (which the f32 path, whose activations are not rounded, would not meet).
TEST(cuda_GemvQ8, StackedQkvOfOneOrTwoTypesMatchesEmulation) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  const int64_t in = 3584, n_head = 28, n_head_kv = 4, head_dim = 128;
  const int64_t q_dim = n_head * head_dim, kv_row = n_head_kv * head_dim;
  for (auto [qk, v] : {std::pair{TensorType::Q4_K, TensorType::Q6_K},
                       std::pair{TensorType::Q5_K, TensorType::Q6_K},
                       std::pair{TensorType::Q5_K, TensorType::Q5_K},
                       std::pair{TensorType::Q6_K, TensorType::Q6_K},
                       std::pair{TensorType::Q4_K, TensorType::Q4_K}}) {
    model::Weights weights;
    add_weight(weights, "wq", qk, q_dim, in, random_floats(q_dim * in, 81));
    add_weight(weights, "wk", qk, kv_row, in, random_floats(kv_row * in, 82));
    add_weight(weights, "wv", v, kv_row, in, random_floats(kv_row * in, 83));
    add_weight(weights, "bv", TensorType::F32, 1, kv_row, random_floats(kv_row, 84));
    auto gpu = create_backend(weights, env_options());
    ASSERT_TRUE(gpu.is_ok()) << gpu.message();
    graph::FusedQkvMeta m = qkv_meta(in, n_head, head_dim, "bv");
    m.kv = graph::KvMeta{0, n_head_kv, head_dim, 1, TensorType::F32, TensorType::F32};
    const Node n = make_node(Op::kFusedQKV, q_dim + 2 * kv_row, 1, m);
    ASSERT_TRUE((*gpu)->supports_op(n));
    const std::vector<float> zeros(4 * kv_row);
    KvRegions kv;
    make_kv(**gpu, graph::DType::kF32, 4, kv_row, bytes_of(zeros), bytes_of(zeros), kv);
    const auto x = random_floats(in, 85, 1.0f / std::sqrt(float(in)));
    auto got = run_node(**gpu, n, {bytes_of(x), bytes_of(std::vector<int32_t>{0})}, &kv.pair);
    ASSERT_TRUE(got.is_ok()) << got.message();
    const Quantized q = quantize_like_gpu(x);
    const std::vector<float> bias = random_floats(kv_row, 84);
    double worst = 0;
    int64_t out = 0;
    for (const char* name : {"wq", "wk", "wv"}) {
      const std::vector<float> w = dequantized(weights, name);
      const int64_t rows = static_cast<int64_t>(w.size()) / in;
      for (int64_t r = 0; r < rows; ++r, ++out) {
        const Expect e = expect_row(w, in, r, x, q);
        const double base = name[1] == 'v' ? bias[r] : 0.0;
        worst = std::max(worst, std::fabs((*got)[out] - base - e.emulated) /
                                    (1e-5 * e.scale + 1e-6 + 1e-7 * std::fabs(base)));
      }
    }
    std::printf("  stacked q8 q/k %-5s v %-5s: emulation %.2f\n",
                std::string(quant::type_name(qk)).c_str(), std::string(quant::type_name(v)).c_str(),
                worst);
    EXPECT_LE(worst, 1.0) << quant::type_name(qk) << " / " << quant::type_name(v);
  }
}

// FusedQKV over paged cells, batch-invariant: the three projections share
// tensor-core launches (one per run of one type: q|k|v, or q|k and a Q6_K
// v), each bit for bit what its own invariant MatMul gives, for one token
// (the one-token kernel) and for batches. At position 0 RoPE is the
// identity, so the packed rows are the products themselves.
TEST(cuda_GemvQ8, StackedTensorCoreQkvEqualsItsMatMulsBitForBit) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  const int64_t in = 1024, n_head = 8, n_head_kv = 2, head_dim = 64;
  const int64_t q_dim = n_head * head_dim, kv_row = n_head_kv * head_dim;
  const int64_t width = q_dim + 2 * kv_row, max_tokens = 40;
  for (auto [qk, v] : {std::pair{TensorType::Q4_0, TensorType::Q4_0},
                       std::pair{TensorType::Q4_K, TensorType::Q6_K},
                       std::pair{TensorType::Q4_K, TensorType::Q4_K}}) {
    model::Weights weights;
    add_weight(weights, "wq", qk, q_dim, in, random_floats(q_dim * in, 91));
    add_weight(weights, "wk", qk, kv_row, in, random_floats(kv_row * in, 92));
    add_weight(weights, "wv", v, kv_row, in, random_floats(kv_row * in, 93));
    add_weight(weights, "bv", TensorType::F32, 1, kv_row, random_floats(kv_row, 94));
    auto gpu = create_backend(weights, env_options());
    ASSERT_TRUE(gpu.is_ok()) << gpu.message();
    const auto x = random_floats(in * max_tokens, 95, 1.0f / std::sqrt(float(in)));
    std::vector<float> expected(static_cast<size_t>(width * max_tokens));
    int64_t col = 0;
    for (auto [name, bias, type, rows] :
         {std::tuple{"wq", "", qk, q_dim}, std::tuple{"wk", "", qk, kv_row},
          std::tuple{"wv", "bv", v, kv_row}}) {
      Node mm = make_node(Op::kMatMul, rows, max_tokens,
                          graph::MatMulMeta{name, bias, type, in, rows, true});
      mm.inputs = {0};
      auto y = run_node(**gpu, mm, {bytes_of(x)});
      ASSERT_TRUE(y.is_ok()) << y.message();
      for (int64_t t = 0; t < max_tokens; ++t) {
        std::copy_n(y->begin() + t * rows, rows, expected.begin() + t * width + col);
      }
      col += rows;
    }
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{40}}) {
      graph::FusedQkvMeta m = qkv_meta(in, n_head, head_dim, "bv");
      m.batch_invariant = true;
      m.kv = graph::KvMeta{0, n_head_kv, head_dim, n, TensorType::F32, TensorType::F32, 16};
      Node node = make_node(Op::kFusedQKV, width, n, m);
      node.inputs = {0, 1, 2};
      ASSERT_TRUE((*gpu)->supports_op(node)) << n << " tokens";
      const std::vector<float> zeros(static_cast<size_t>(max_tokens * kv_row));
      KvRegions kv;
      make_kv(**gpu, graph::DType::kF32, max_tokens, kv_row, bytes_of(zeros), bytes_of(zeros), kv);
      const std::vector<float> xs(x.begin(), x.begin() + n * in);
      auto got = run_node(
          **gpu, node,
          {bytes_of(xs), bytes_of(std::vector<int32_t>(n, 0)), bytes_of(iota_positions(n, 0))},
          &kv.pair);
      ASSERT_TRUE(got.is_ok()) << got.message();
      int64_t differing = 0;
      for (int64_t i = 0; i < n * width; ++i) {
        differing += std::memcmp(&(*got)[i], &expected[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(differing, 0) << quant::type_name(qk) << " / " << quant::type_name(v) << ", " << n
                              << " tokens: " << differing << " of " << n * width << " differ";
    }
  }
}

// The same FusedFFN node on the f32 path (MINFER_GEMV_F32=1): the input norm
// runs as its own kernel, then the f32 GEMV; the result matches the exact
// dot of the normalized input to 1e-3 (the f32 path's tolerance).
TEST(cuda_GemvQ8, InputNormOnTheF32Path) {
  MINFER_SKIP_WITHOUT_CUDA();
  setenv("MINFER_GEMV_F32", "1", 1);
  const int64_t in = 896, n_ff = 700;
  model::Weights weights;
  add_weight(weights, "gate", TensorType::Q4_0, n_ff, in, random_floats(in * n_ff, 61));
  add_weight(weights, "up", TensorType::Q4_0, n_ff, in, random_floats(in * n_ff, 62));
  const auto norm_w = random_floats(in, 63);
  add_weight(weights, "norm", TensorType::F32, 1, in, norm_w);
  auto gpu = create_backend(weights, env_options());
  unsetenv("MINFER_GEMV_F32");
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  const std::vector<float> wg = dequantized(weights, "gate");
  const std::vector<float> wu = dequantized(weights, "up");
  const auto x_raw = random_floats(in, 64, 3.0f);
  const auto x = rms_normalized(x_raw, norm_w, 1e-6f);
  Node n;
  n.op = Op::kFusedFFN;
  n.shape.ne = {n_ff, 1};
  n.name = "test.ffn_f32";
  n.inputs = {0};
  graph::FusedFfnMeta m{"gate", "up", false, in, n_ff, {}};
  m.in_norm = graph::InputNorm{true, "norm", 1e-6f};
  n.meta = m;
  auto got = run_node(**gpu, n, {bytes_of(x_raw)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  double diff = 0;
  for (int64_t r = 0; r < n_ff; ++r) {
    double g = 0, u = 0;
    for (int64_t k = 0; k < in; ++k) {
      g += double(wg[r * in + k]) * x[k];
      u += double(wu[r * in + k]) * x[k];
    }
    diff = std::max(diff, std::fabs((*got)[r] - g / (1 + std::exp(-g)) * u));
  }
  std::printf("  ffn f32 with input norm: max diff %.2e\n", diff);
  EXPECT_LT(diff, 1e-3 * std::sqrt(double(in)));
}

// Batches of 2 to kMmaMinTokens - 1 tokens of a node that need not be
// batch-invariant take the int8 tensor-core products (mmq.cu) for every type
// they have (Q4_K / Q5_K / Q6_K since they have them): every token's outputs,
// with bias and residual, against the int8 emulation and the rounding bound.
// The shapes cross partial row tiles (37, 40 rows), one super-block rows
// (in 256), the slice choice (few and many row tiles) and partial token
// groups (3, 17 and 70 tokens: 8 or 16 a warp).
TEST(cuda_GemvQ8, TensorCoreBatchesMatchEmulationAndBound) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  struct Shape {
    int64_t in, out;
  };
  for (TensorType type : kQ8Types) {
    for (const Shape& sh : {Shape{256, 37}, Shape{3584, 40}, Shape{1024, 4200}, Shape{18944, 96}}) {
      if (rows_unfit(type, sh.in)) continue;
      model::Weights weights;
      add_weight(weights, "w", type, sh.out, sh.in, random_floats(sh.in * sh.out, 81));
      add_weight(weights, "b", TensorType::F32, 1, sh.out, random_floats(sh.out, 82));
      auto gpu = create_backend(weights, env_options());
      ASSERT_TRUE(gpu.is_ok()) << gpu.message();
      const std::vector<float> w = dequantized(weights, "w");
      const std::vector<float> bias = random_floats(sh.out, 82);
      for (int64_t n_tokens : {int64_t{3}, int64_t{17}, int64_t{70}}) {
        const auto x = random_floats(sh.in * n_tokens, 83, 1.0f / std::sqrt(float(sh.in)));
        const auto res = random_floats(sh.out * n_tokens, 84);
        Node n;
        n.op = Op::kMatMulAdd;
        n.shape.ne = {sh.out, n_tokens};
        n.name = "test.mmq";
        n.inputs = {0, 1};
        n.meta = graph::MatMulMeta{"w", "b", type, sh.in, sh.out};
        ASSERT_TRUE((*gpu)->supports_op(n));
        auto got = run_node(**gpu, n, {bytes_of(x), bytes_of(res)});
        ASSERT_TRUE(got.is_ok()) << got.message();
        Worst worst;
        for (int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> xt(x.begin() + t * sh.in, x.begin() + (t + 1) * sh.in);
          const Quantized q = quantize_like_gpu(xt, tensor_core_span(type));
          for (int64_t r = 0; r < sh.out; ++r) {
            worst.add((*got)[t * sh.out + r], bias[r] + double(res[t * sh.out + r]),
                      expect_row(w, sh.in, r, xt, q));
          }
        }
        std::printf("  mmq %-5s in %5lld out %5lld tokens %3lld: emulation %.2f, bound %.2f\n",
                    std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                    static_cast<long long>(sh.out), static_cast<long long>(n_tokens), worst.emu,
                    worst.bound);
        EXPECT_LE(worst.emu, 1.0) << quant::type_name(type) << " in " << sh.in;
        EXPECT_LE(worst.bound, 1.0) << quant::type_name(type) << " in " << sh.in;
      }
    }
  }
}

// A batch of n tokens through a batch-invariant node: each token's outputs
// equal, bit for bit, that token run alone; and the batch is right (the
// emulation bound of the one-token test, on every token's rows). Batch sizes
// cross every tokens-per-block choice (1, 2, 4, 8, partial groups) and the
// tensor-core size (130), and the shapes cross the rows-per-warp choice
// (16500 rows), the shared-memory caps (in 4864 and 18944) and, for Q4_K /
// Q5_K, the one-token kernel of mmq_one.cuh (36000 rows: one slice on the
// H200, so one token takes that kernel and every batch the tensor cores).
// The 16500- and 36000-row matrices are large launches (mmq.cu: blocks in
// token-group order, and 32 tokens a warp for Q4_0 / Q8_0 past 16 tokens).
TEST(cuda_GemvQ8, TokensAreBatchInvariant) {
  MINFER_SKIP_WITHOUT_CUDA();
  GemvF32Off q8_on;
  struct Shape {
    int64_t in, out;
  };
  for (TensorType type : kQ8Types) {
    for (const Shape& sh : {Shape{896, 160}, Shape{1024, 16500}, Shape{1024, 36000},
                            Shape{4864, 96}, Shape{18944, 40}}) {
      if (rows_unfit(type, sh.in)) continue;
      model::Weights weights;
      add_weight(weights, "w", type, sh.out, sh.in, random_floats(sh.in * sh.out, 71));
      add_weight(weights, "gate", type, sh.out, sh.in, random_floats(sh.in * sh.out, 72));
      const auto norm_w = random_floats(sh.in, 73);
      add_weight(weights, "norm", TensorType::F32, 1, sh.in, norm_w);
      auto gpu = create_backend(weights, env_options());
      ASSERT_TRUE(gpu.is_ok()) << gpu.message();
      const std::vector<float> w = dequantized(weights, "w");
      for (int kind = 0; kind < 3; ++kind) {  // MatMul, MatMulAdd, FusedFFN with input norm
        const auto node = [&](int64_t n_tokens) {
          Node n;
          n.name = "test.invariant";
          n.shape.ne = {sh.out, n_tokens};
          n.inputs = kind == 1 ? std::vector<graph::NodeId>{0, 1} : std::vector<graph::NodeId>{0};
          if (kind == 2) {
            n.op = Op::kFusedFFN;
            graph::FusedFfnMeta m{"gate", "w", false, sh.in, sh.out, {}};
            m.in_norm = graph::InputNorm{true, "norm", 1e-6f};
            m.batch_invariant = true;
            n.meta = m;
          } else {
            n.op = kind == 1 ? Op::kMatMulAdd : Op::kMatMul;
            n.meta = graph::MatMulMeta{"w", "", type, sh.in, sh.out, true};
          }
          return n;
        };
        const int64_t max_tokens = sh.out > 10000 ? 20 : 130;
        const auto x = random_floats(sh.in * max_tokens, 74, 1.0f / std::sqrt(float(sh.in)));
        const auto res = random_floats(sh.out * max_tokens, 75);
        const auto rows_of = [&](const std::vector<float>& v, int64_t width, int64_t first,
                                 int64_t n) {
          return std::vector<float>(v.begin() + first * width, v.begin() + (first + n) * width);
        };
        const auto run = [&](int64_t first, int64_t n) {
          const Node nd = node(n);
          EXPECT_TRUE((*gpu)->supports_op(nd));
          std::vector<std::vector<std::byte>> in = {bytes_of(rows_of(x, sh.in, first, n))};
          if (kind == 1) in.push_back(bytes_of(rows_of(res, sh.out, first, n)));
          return run_node(**gpu, nd, in);
        };
        std::vector<std::vector<float>> alone;
        for (int64_t t = 0; t < max_tokens; ++t) {
          auto one = run(t, 1);
          ASSERT_TRUE(one.is_ok()) << one.message();
          alone.push_back(*one);
        }
        for (int64_t n : {int64_t{2}, int64_t{3}, int64_t{5}, int64_t{8}, int64_t{13}, int64_t{20},
                          int64_t{64}, int64_t{130}}) {
          if (n > max_tokens) continue;
          auto got = run(max_tokens - n, n);  // the batch's last n tokens
          ASSERT_TRUE(got.is_ok()) << got.message();
          int64_t differing = 0;
          for (int64_t t = 0; t < n; ++t) {
            const auto& a = alone[static_cast<size_t>(max_tokens - n + t)];
            differing += std::memcmp(a.data(), got->data() + t * sh.out, a.size() * 4) != 0;
          }
          EXPECT_EQ(differing, 0) << quant::type_name(type) << " in " << sh.in << " kind " << kind
                                  << ": " << differing << " of " << n << " tokens differ";
        }
        if (kind != 0) continue;
        double worst = 0;  // the batch's values: every token within the emulation tolerance
        for (int64_t t = 0; t < max_tokens; t += 7) {
          const std::vector<float> xt = rows_of(x, sh.in, t, 1);
          const Quantized q = quantize_like_gpu(xt, tensor_core_span(type));
          for (int64_t r = 0; r < sh.out; r += 3) {
            const Expect e = expect_row(w, sh.in, r, xt, q);
            worst = std::max(worst, std::fabs(alone[static_cast<size_t>(t)][r] - e.emulated) /
                                        (1e-5 * e.scale + 1e-6));
          }
        }
        std::printf("  q8 batch %-5s in %5lld out %5lld: emulation %.2f\n",
                    std::string(quant::type_name(type)).c_str(), static_cast<long long>(sh.in),
                    static_cast<long long>(sh.out), worst);
        EXPECT_LE(worst, 1.0) << quant::type_name(type) << " in " << sh.in;
      }
    }
  }
}

}  // namespace
}  // namespace minfer::cuda::testing
