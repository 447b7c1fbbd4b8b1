// The CUDA backend's non-matmul ops against the CPU backend (same nodes, same
// inputs; the GPU path is f32 throughout) at realistic shapes: element-wise
// ops, RMSNorm (rows and per-head groups), RoPE (NeoX and normal, partial
// rotation, frequency factors), the q8_0 KV store bit for bit, FusedQKV's
// stores, the KV cache types attention accepts, and the refusals and
// device-side errors; gpt-oss's swiglu_oai and YaRN RoPE (unfused and in
// FusedQKV) against their formulas in double (docs/GPT_OSS.md). Attention's
// numbers: cuda_attention_test.cpp. Tolerance: max abs diff < 1e-3 unless
// stated (measured values are printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_testutil.h"
#include "graph/yarn.h"
#include "quant/half.h"

namespace minfer::cuda::testing {
namespace {

using graph::DType;

constexpr double kTol = 1e-3;

TEST(cuda_Ops, ElementwiseMatchCpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t d = 3584, rows = 5;
  const auto x = random_floats(d * rows, 1, 3.0f);
  const auto y = random_floats(d * rows, 2, 3.0f);
  for (Op op : {Op::kAdd, Op::kMul, Op::kScale, Op::kSilu, Op::kSwiGLU}) {
    const bool binary = op == Op::kAdd || op == Op::kMul || op == Op::kSwiGLU;
    Node n =
        make_node(op, d, rows,
                  op == Op::kScale ? graph::NodeMeta(graph::ScaleMeta{0.37f}) : graph::NodeMeta{});
    std::vector<std::vector<std::byte>> in = {bytes_of(x)};
    if (binary) in.push_back(bytes_of(y));
    for (bool in_place : {false, true}) {
      auto got = run_node(*b.gpu, n, in, nullptr, in_place);
      ASSERT_TRUE(got.is_ok()) << got.message();
      auto want = run_node(*b.cpu, n, in);
      ASSERT_TRUE(want.is_ok()) << want.message();
      const double diff = max_abs_diff(*got, *want);
      std::printf("  %-8s in_place %d max diff %.2e\n", graph::op_name(op), in_place, diff);
      EXPECT_LT(diff, 1e-5) << graph::op_name(op);
    }
  }
}

TEST(cuda_Ops, GeluIsTheTanhApproximation) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t n = 896 * 4;
  const auto x = random_floats(n, 3, 4.0f);
  const auto u = random_floats(n, 4, 1.0f);
  auto gelu = [](double v) {
    return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v)));
  };
  auto got = run_node(*b.gpu, make_node(Op::kGelu, n, 1), {bytes_of(x)});
  ASSERT_TRUE(got.is_ok()) << got.message();
  auto glu = run_node(*b.gpu, make_node(Op::kGeGLU, n, 1), {bytes_of(x), bytes_of(u)});
  ASSERT_TRUE(glu.is_ok()) << glu.message();
  double d1 = 0, d2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    d1 = std::max(d1, std::abs((*got)[i] - gelu(x[i])));
    d2 = std::max(d2, std::abs((*glu)[i] - gelu(x[i]) * u[i]));
  }
  std::printf("  gelu max diff %.2e, geglu %.2e\n", d1, d2);
  EXPECT_LT(d1, 1e-5);
  EXPECT_LT(d2, 1e-5);
}

TEST(cuda_Ops, RmsNormRowsAndHeadsMatchCpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  add_weight(b.weights, "norm896", quant::TensorType::F32, 1, 896, random_floats(896, 5));
  add_weight(b.weights, "norm3584", quant::TensorType::F32, 1, 3584, random_floats(3584, 6));
  add_weight(b.weights, "qnorm128", quant::TensorType::F32, 1, 128, random_floats(128, 7));
  b.start();
  struct Case {
    int64_t d, rows, group;
    std::string weight;
  };
  for (const Case& c : {Case{896, 7, 0, "norm896"}, Case{3584, 3, 0, "norm3584"},
                        Case{3584, 2, 0, ""}, Case{14 * 128, 5, 128, "qnorm128"}}) {
    const auto x = random_floats(c.d * c.rows, 8, 2.0f);
    Node n = make_node(Op::kRmsNorm, c.d, c.rows, graph::RmsNormMeta{c.weight, 1e-6f, c.group});
    for (bool in_place : {false, true}) {
      auto got = run_node(*b.gpu, n, {bytes_of(x)}, nullptr, in_place);
      ASSERT_TRUE(got.is_ok()) << got.message();
      auto want = run_node(*b.cpu, n, {bytes_of(x)});
      ASSERT_TRUE(want.is_ok()) << want.message();
      const double diff = max_abs_diff(*got, *want);
      std::printf("  rms_norm d %lld rows %lld group %lld: max diff %.2e\n",
                  static_cast<long long>(c.d), static_cast<long long>(c.rows),
                  static_cast<long long>(c.group), diff);
      EXPECT_LT(diff, 1e-4);
    }
  }
}

TEST(cuda_Ops, RopeMatchesCpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  std::vector<float> factors(32);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * static_cast<float>(i % 5);
  add_weight(b.weights, "rope_freqs", quant::TensorType::F32, 1, 32, factors);
  b.start();
  struct Case {
    int64_t heads, head_dim, n_rot;
    graph::RopeMode mode;
    float base;
    std::string factors;
    int32_t first;
  };
  for (const Case& c : {Case{14, 64, 64, graph::RopeMode::kNeox, 1e6f, "", 0},
                        Case{28, 128, 128, graph::RopeMode::kNeox, 1e6f, "", 3000},
                        Case{4, 256, 256, graph::RopeMode::kNeox, 1e4f, "", 17},
                        Case{8, 64, 64, graph::RopeMode::kNormal, 5e5f, "rope_freqs", 100},
                        Case{8, 128, 64, graph::RopeMode::kNormal, 1e4f, "rope_freqs", 5},
                        Case{8, 64, 32, graph::RopeMode::kNeox, 1e4f, "", 900}}) {
    const int64_t n_tokens = 9;
    graph::RopeMeta m;
    m.n_heads = c.heads;
    m.head_dim = c.head_dim;
    m.n_rot = c.n_rot;
    m.mode = c.mode;
    m.freq_base = c.base;
    m.freq_factors = c.factors;
    const auto x = random_floats(c.heads * c.head_dim * n_tokens, 9);
    const auto pos = iota_positions(n_tokens, c.first);
    Node n = make_node(Op::kRope, c.heads * c.head_dim, n_tokens, m);
    for (bool in_place : {false, true}) {
      auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(pos)}, nullptr, in_place);
      ASSERT_TRUE(got.is_ok()) << got.message();
      auto want = run_node(*b.cpu, n, {bytes_of(x), bytes_of(pos)});
      ASSERT_TRUE(want.is_ok()) << want.message();
      const double diff = max_abs_diff(*got, *want);
      std::printf("  rope heads %lld hd %lld n_rot %lld first pos %d: max diff %.2e\n",
                  static_cast<long long>(c.heads), static_cast<long long>(c.head_dim),
                  static_cast<long long>(c.n_rot), c.first, diff);
      EXPECT_LT(diff, kTol);
    }
  }
}

// --- gpt-oss: swiglu_oai and YaRN ---------------------------------------------

// swiglu_oai in double over the kernel's float inputs and constants; a NaN
// input gives NaN (the comparisons let it through).
double swiglu_oai_reference(float gate, float up, float alpha, float limit) {
  const double g = gate, u = up, lim = limit;
  const double x = g > lim ? lim : g;
  const double y = u < -lim ? -lim : (u > lim ? lim : u);
  return x / (1.0 + std::exp(double(alpha) * -x)) * (y + 1.0);
}

// The f32 evaluation's error relative to |reference|: rounding alpha * -x
// moves the exponential by |alpha x| 2^-24, CUDA's expf (2 ulp), the add,
// the division and the two multiplies a few half-ulps more. Where
// exp(alpha * -x) is near or past f32's range (gates below about -52) expf
// may overflow, and the result is then exactly 0 (the reference's is below
// 1e-35).
bool swiglu_oai_close(float got, double want, float gate, float alpha, float limit) {
  if (std::isnan(want)) return std::isnan(got);
  const double x = std::min(double(gate), double(limit));
  const double rel = (std::fabs(double(alpha) * x) + 12.0) * 0x1p-24;
  const bool may_overflow = std::exp(double(alpha) * -x) >= 0.5 * double(FLT_MAX);
  if (may_overflow && got == 0.0f) return true;
  return std::fabs(double(got) - want) <= rel * std::fabs(want);
}

// Runs a kSwiGLUOai node on the GPU (in place on gate, or not) and checks
// every element against the formula.
void check_swiglu_oai(backend::Backend& gpu, const std::vector<float>& gate,
                      const std::vector<float>& up, float alpha, float limit) {
  Node n =
      make_node(Op::kSwiGLUOai, static_cast<int64_t>(gate.size()), 1, graph::GluMeta{alpha, limit});
  n.inputs = {0, 1};
  ASSERT_TRUE(gpu.supports_op(n));
  for (bool in_place : {false, true}) {
    auto got = run_node(gpu, n, {bytes_of(gate), bytes_of(up)}, nullptr, in_place);
    ASSERT_TRUE(got.is_ok()) << got.message();
    size_t bad = 0;
    for (size_t i = 0; i < gate.size(); ++i) {
      const double want = swiglu_oai_reference(gate[i], up[i], alpha, limit);
      if (swiglu_oai_close((*got)[i], want, gate[i], alpha, limit)) continue;
      if (++bad <= 5) {
        ADD_FAILURE() << "gate " << gate[i] << " up " << up[i] << ": " << (*got)[i] << " vs "
                      << want << (in_place ? " (in place)" : "");
      }
    }
    std::printf("  swiglu_oai alpha %g limit %g, %zu elements, in_place %d: %zu off\n", alpha,
                limit, gate.size(), in_place, bad);
    EXPECT_EQ(bad, 0u);
  }
}

// At and around the limits, zero, up = -1, large, infinite and NaN inputs
// (every gate against every up), then random inputs spread past the limits
// and a ramp of gates into expf's overflow; the constants come from the node.
TEST(cuda_Ops, SwiGluOaiMatchesDoubleFormula) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> edges = {0.0f,  -0.0f, 1.0f,   -1.0f,   0.5f,  -0.5f, 3.0f,
                              -3.0f, 60.0f, -60.0f, 1e3f,    -1e3f, 1e30f, -1e30f,
                              inf,   -inf,  1e-30f, -1e-30f, nan};
  for (float l : {7.0f, -7.0f}) {
    for (float e : {l, std::nextafter(l, inf), std::nextafter(l, -inf), l + 0.25f, l - 0.25f}) {
      edges.push_back(e);
    }
  }
  std::vector<float> gate, up;
  for (float g : edges) {
    for (float u : edges) {
      gate.push_back(g);
      up.push_back(u);
    }
  }
  check_swiglu_oai(*b.gpu, gate, up, 1.702f, 7.0f);
  check_swiglu_oai(*b.gpu, random_floats(4096, 1, 6.0f), random_floats(4096, 2, 6.0f), 1.702f,
                   7.0f);
  std::vector<float> ramp;
  for (int i = -600; i <= 100; ++i) ramp.push_back(0.1f * static_cast<float>(i));
  check_swiglu_oai(*b.gpu, ramp, random_floats(static_cast<int64_t>(ramp.size()), 9, 6.0f), 1.702f,
                   7.0f);
  check_swiglu_oai(*b.gpu, random_floats(512, 3, 4.0f), random_floats(512, 4, 4.0f), 1.0f, 2.5f);
}

// gpt-oss's YaRN (graph::apply_yarn): 64 rotated dims, base 150000, freq
// scale 1/32 over an original context of 4096, betas 32 and 1.
graph::RopeMeta yarn_meta(int64_t n_heads, int64_t head_dim, graph::RopeMode mode) {
  graph::RopeMeta m;
  m.n_heads = n_heads;
  m.head_dim = head_dim;
  m.n_rot = 64;
  m.mode = mode;
  m.freq_base = 150000.0f;
  m.freq_scale = 1.0f / 32.0f;
  graph::apply_yarn({64, 4096, 150000.0f, 1.0f / 32.0f, 32.0f, 1.0f, 1.0f, 1.0f}, m);
  return m;
}

// cos and sin of pair i's YaRN angle at `pos`, times mscale, in double; the
// ramp in f32 as every backend computes it (ggml's order), so that pairs
// strictly between corr_low and corr_high blend with the kernels' mix.
std::pair<double, double> yarn_cos_sin(const graph::RopeMeta& m, int32_t pos, int64_t i) {
  const double extrap =
      double(pos) * std::pow(double(m.freq_base), -2.0 * double(i) / double(m.n_rot));
  const double interp = double(m.freq_scale) * extrap;
  const float y = (static_cast<float>(i) - m.corr_low) / std::max(0.001f, m.corr_high - m.corr_low);
  const float ramp = 1.0f - std::clamp(y, 0.0f, 1.0f);
  const double mix = double(ramp * m.ext_factor);
  const double theta = interp * (1.0 - mix) + extrap * mix;
  return {std::cos(theta) * double(m.mscale), std::sin(theta) * double(m.mscale)};
}

// Head `h` of x (head_dim floats at `xh`) rotated by the formulas into `out`.
void yarn_rotate_head(const graph::RopeMeta& m, int32_t pos, const float* xh, double* out) {
  for (int64_t d = 0; d < m.head_dim; ++d) out[d] = xh[d];
  const int64_t half = m.n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const auto [c, s] = yarn_cos_sin(m, pos, i);
    const bool neox = m.mode == graph::RopeMode::kNeox;
    const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    out[i0] = double(xh[i0]) * c - double(xh[i1]) * s;
    out[i1] = double(xh[i0]) * s + double(xh[i1]) * c;
  }
}

// RoPE with YaRN, NeoX and normal, full and partial rotation: every value
// against the formulas in double, at positions from 0 past the original
// context to 100000 (the GPU's angles are double: within 2e-6 of the
// pair's |x0| + |x1|); rows at positions <= 100 against the CPU too (whose
// f32 angle recurrence drifts at large positions, as ggml's).
TEST(cuda_Ops, RopeYarnMatchesDoubleFormulasAndCpu) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const std::vector<int32_t> pos = {0, 1, 2, 7, 64, 100, 4095, 4096, 100000};
  const int64_t n_tokens = static_cast<int64_t>(pos.size()), heads = 4;
  struct Case {
    int64_t head_dim;
    graph::RopeMode mode;
  };
  for (const Case& c : {Case{64, graph::RopeMode::kNeox}, Case{64, graph::RopeMode::kNormal},
                        Case{128, graph::RopeMode::kNeox}}) {
    const graph::RopeMeta m = yarn_meta(heads, c.head_dim, c.mode);
    ASSERT_EQ(m.ext_factor, 1.0f);
    const int64_t row = heads * c.head_dim;
    const auto x = random_floats(row * n_tokens, 40);
    Node n = make_node(Op::kRope, row, n_tokens, m);
    ASSERT_TRUE(b.gpu->supports_op(n));
    auto got = run_node(*b.gpu, n, {bytes_of(x), bytes_of(pos)});
    ASSERT_TRUE(got.is_ok()) << got.message();
    auto cpu = run_node(*b.cpu, n, {bytes_of(x), bytes_of(pos)});
    ASSERT_TRUE(cpu.is_ok()) << cpu.message();
    double worst = 0.0, cpu_diff = 0.0;
    std::vector<double> want(static_cast<size_t>(c.head_dim));
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = t * row + h * c.head_dim;
        yarn_rotate_head(m, pos[static_cast<size_t>(t)], x.data() + off, want.data());
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const float g = (*got)[static_cast<size_t>(off + d)];
          if (d >= m.n_rot) {
            EXPECT_EQ(g, x[static_cast<size_t>(off + d)]) << "copied dim " << d;
            continue;
          }
          const int64_t half = m.n_rot / 2, i = d % half;
          const bool neox = m.mode == graph::RopeMode::kNeox;
          const int64_t i0 = neox ? i : (d & ~int64_t{1}), i1 = neox ? i + half : i0 + 1;
          const double mag =
              std::max(1e-3, double(std::fabs(x[off + i0]) + std::fabs(x[off + i1])));
          worst = std::max(worst, std::fabs(g - want[static_cast<size_t>(d)]) / mag);
          if (pos[static_cast<size_t>(t)] <= 100) {
            cpu_diff = std::max(cpu_diff, double(std::fabs(g - (*cpu)[off + d])));
          }
        }
      }
    }
    std::printf("  rope yarn hd %lld %s: max diff / (|x0| + |x1|) %.2e, vs cpu %.2e\n",
                static_cast<long long>(c.head_dim),
                c.mode == graph::RopeMode::kNeox ? "neox" : "normal", worst, cpu_diff);
    EXPECT_LT(worst, 2e-6);
    EXPECT_LT(cpu_diff, kTol);
  }
}

// ext_factor 0 is plain RoPE whatever the other YaRN fields hold: the same
// bits as a meta without them (the kernel skips the YaRN math).
TEST(cuda_Ops, RopeWithoutYarnIgnoresTheYarnFields) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  graph::RopeMeta plain;
  plain.n_heads = 8;
  plain.head_dim = 64;
  plain.n_rot = 64;
  plain.freq_base = 1e4f;
  graph::RopeMeta off = plain;
  off.corr_low = 8.0f;
  off.corr_high = 18.0f;
  off.mscale = 1.5f;
  const auto x = random_floats(8 * 64 * 5, 42);
  const auto pos = iota_positions(5, 4094);
  auto a = run_node(*b.gpu, make_node(Op::kRope, 8 * 64, 5, plain), {bytes_of(x), bytes_of(pos)});
  ASSERT_TRUE(a.is_ok()) << a.message();
  auto c = run_node(*b.gpu, make_node(Op::kRope, 8 * 64, 5, off), {bytes_of(x), bytes_of(pos)});
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(std::memcmp(a->data(), c->data(), a->size() * sizeof(float)), 0);
}

constexpr TensorType kF32 = TensorType::F32, kF16 = TensorType::F16, kQ8 = TensorType::Q8_0;

// FusedQKV's per-head RoPE with YaRN (the one-token decode path): its q and
// k heads against the projections and the rotation in double, v as
// projected; before and past the original context.
TEST(cuda_Ops, FusedQkvAppliesYarn) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t in_dim = 128, n_head = 4, n_head_kv = 2, head_dim = 64, n_ctx = 4100;
  const int64_t q_dim = n_head * head_dim, kv_row = n_head_kv * head_dim;
  Backends b;
  add_qkv_weights(b.weights, in_dim, q_dim, kv_row, 43);
  b.start();
  graph::FusedQkvMeta m = qkv_meta(in_dim, n_head, head_dim);
  m.rope = yarn_meta(n_head, head_dim, graph::RopeMode::kNeox);
  m.kv = graph::KvMeta{0, n_head_kv, head_dim, 1, kF32, kF32};
  Node n = make_node(Op::kFusedQKV, q_dim + 2 * kv_row, 1, m);
  ASSERT_TRUE(b.gpu->supports_op(n));
  const std::vector<float> zeros(static_cast<size_t>(n_ctx * kv_row), 0.0f);
  KvRegions kv;
  make_kv(*b.gpu, DType::kF32, n_ctx, kv_row, bytes_of(zeros), bytes_of(zeros), kv);
  const auto x = random_floats(in_dim, 46, 3.0f);
  // The projections in double, heads [q | k | v].
  std::vector<float> proj;
  for (const char* w : {"wq", "wk", "wv"}) {
    const std::vector<float> wv = dequantized(b.weights, w);
    for (size_t r = 0; r < wv.size() / in_dim; ++r) {
      double d = 0.0;
      for (int64_t i = 0; i < in_dim; ++i) d += double(wv[r * in_dim + i]) * x[i];
      proj.push_back(static_cast<float>(d));
    }
  }
  for (int32_t p : {5, 4096}) {
    auto out = run_node(*b.gpu, n, {bytes_of(x), bytes_of(std::vector<int32_t>{p})}, &kv.pair);
    ASSERT_TRUE(out.is_ok()) << out.message();
    double diff = 0.0;
    std::vector<double> want(static_cast<size_t>(head_dim));
    for (int64_t h = 0; h < n_head + 2 * n_head_kv; ++h) {
      const float* ph = proj.data() + h * head_dim;
      if (h < n_head + n_head_kv) {
        yarn_rotate_head(m.rope, p, ph, want.data());
      } else {
        std::copy(ph, ph + head_dim, want.begin());
      }
      for (int64_t d = 0; d < head_dim; ++d) {
        diff = std::max(diff, std::fabs((*out)[h * head_dim + d] - want[static_cast<size_t>(d)]));
      }
    }
    std::printf("  fused qkv yarn position %d: max diff %.2e\n", p, diff);
    EXPECT_LT(diff, 1e-4);
  }
}

TEST(cuda_Ops, RefusesWhatItCannotRun) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  Node attn = make_node(Op::kAttention, 4 * 80, 1, attention_meta(4, 1, 80));  // no kernel
  EXPECT_FALSE(b.gpu->supports_op(attn));
  auto r =
      run_node(*b.gpu, attn, {bytes_of(random_floats(320, 1)), {}, bytes_of(iota_positions(1, 0))});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("test.attention"), std::string::npos) << r.message();
  Node mm = make_node(Op::kMatMul, 8, 1,
                      graph::MatMulMeta{"missing", "", quant::TensorType::Q4_0, 64, 8});
  EXPECT_FALSE(b.gpu->supports_op(mm));
  EXPECT_FALSE(b.gpu->has_weight("missing"));
  EXPECT_TRUE(b.gpu->supports_fused(Op::kSwiGLU));
  EXPECT_TRUE(b.gpu->supports_fused(Op::kFusedQKV));
  EXPECT_TRUE(b.gpu->supports_fused(Op::kMatMulAdd));
}

TEST(cuda_Ops, PositionPastTheCacheIsAnErrorAtSynchronize) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  KvRegions kv;
  std::vector<float> zeros(4 * 64, 0.0f);
  make_kv(*b.gpu, DType::kF32, 4, 64, bytes_of(zeros), bytes_of(zeros), kv);
  Node store = make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, 1, 64, 1});
  const auto row = random_floats(64, 1);
  auto r = run_node(*b.gpu, store, {bytes_of(row), bytes_of(row), bytes_of(iota_positions(1, 7))},
                    &kv.pair);
  ASSERT_FALSE(r.is_ok());
  std::printf("  %s\n", r.message().c_str());
  EXPECT_NE(r.message().find("position 7"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("kv_store 'test.kv_store'"), std::string::npos) << r.message();
  // The backend stays usable.
  auto ok = run_node(*b.gpu, store, {bytes_of(row), bytes_of(row), bytes_of(iota_positions(1, 3))},
                     &kv.pair);
  EXPECT_TRUE(ok.is_ok()) << ok.message();
}

// Rows whose q8_0 blocks probe the quantizer's rounding: exact halves after
// scaling (round half away from zero, not to even), an all-zero block (d =
// 0), tiny values whose scale rounds to 0 in f16, huge ones whose scale
// overflows f16, a block of one sign, and random blocks of mixed magnitude.
std::vector<float> q8_probe_rows(int64_t n_rows, int64_t row, uint32_t seed) {
  std::vector<float> x = random_floats(n_rows * row, seed, 2.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* xr = x.data() + r * row;
    for (int e = 0; e < 32; ++e) {  // d = 1: x * id is exact
      xr[e] = e == 0 ? 127.0f : (e % 2 ? 1.0f : -1.0f) * (static_cast<float>(e) * 3.0f + 0.5f);
    }
    for (int e = 32; e < 64; ++e) xr[e] = 0.0f;
    for (int e = 64; e < 96; ++e) xr[e] *= 1e-30f;
    for (int e = 96; e < 128; ++e) xr[e] *= 1e7f;
    for (int e = 128; e < 160 && e < row; ++e) xr[e] = std::fabs(xr[e]) * static_cast<float>(r + 1);
    for (int64_t e = 160; e < row; ++e) xr[e] *= static_cast<float>(1 << (e / 32 % 8)) / 16.0f;
  }
  return x;
}

// KV store into q8_0 (and mixed) caches: the bytes equal the CPU store's and
// quant::quantize_row's, bit for bit; rows other than the batch's untouched.
TEST(cuda_Ops, KvStoreQ8_0IsTheCpuQuantizerBitForBit) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t n_head_kv = 4, head_dim = 64, row = n_head_kv * head_dim, n_ctx = 6;
  const std::vector<int32_t> pos = {4, 0, 5, 2};  // not consecutive
  const int64_t n_tokens = static_cast<int64_t>(pos.size());
  const auto k = q8_probe_rows(n_tokens, row, 21);
  const auto v = q8_probe_rows(n_tokens, row, 22);
  for (auto [kt, vt] : {std::pair{kQ8, kQ8}, {kF16, kQ8}, {kQ8, kF32}}) {
    SCOPED_TRACE(::testing::Message() << quant::type_name(kt) << "/" << quant::type_name(vt));
    const auto k_init = encode_rows(kt, random_floats(n_ctx * row, 23), row);
    const auto v_init = encode_rows(vt, random_floats(n_ctx * row, 24), row);
    KvRegions gpu_kv, cpu_kv;
    make_kv(*b.gpu, kt, vt, n_ctx, row, k_init, v_init, gpu_kv);
    make_kv(*b.cpu, kt, vt, n_ctx, row, k_init, v_init, cpu_kv);
    Node store =
        make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, n_head_kv, head_dim, n_tokens, kt, vt});
    const std::vector<std::vector<std::byte>> in = {bytes_of(k), bytes_of(v), bytes_of(pos)};
    auto g = run_node(*b.gpu, store, in, &gpu_kv.pair);
    ASSERT_TRUE(g.is_ok()) << g.message();
    auto c = run_node(*b.cpu, store, in, &cpu_kv.pair);
    ASSERT_TRUE(c.is_ok()) << c.message();
    const auto gk = read_all(*b.gpu, gpu_kv.pair.k), gv = read_all(*b.gpu, gpu_kv.pair.v);
    EXPECT_TRUE(gk == read_all(*b.cpu, cpu_kv.pair.k)) << "K bytes differ from the CPU store";
    EXPECT_TRUE(gv == read_all(*b.cpu, cpu_kv.pair.v)) << "V bytes differ from the CPU store";
    // Against the reference quantizer directly, row by row.
    const auto k_rows = encode_rows(kt, k, row), v_rows = encode_rows(vt, v, row);
    const size_t krb = k_rows.size() / pos.size(), vrb = v_rows.size() / pos.size();
    std::vector<std::byte> k_want(k_init), v_want(v_init);
    for (size_t t = 0; t < pos.size(); ++t) {
      std::copy_n(k_rows.begin() + static_cast<ptrdiff_t>(t * krb), krb,
                  k_want.begin() + static_cast<ptrdiff_t>(pos[t] * krb));
      std::copy_n(v_rows.begin() + static_cast<ptrdiff_t>(t * vrb), vrb,
                  v_want.begin() + static_cast<ptrdiff_t>(pos[t] * vrb));
    }
    size_t k_bad = 0, v_bad = 0;
    for (size_t i = 0; i < gk.size(); ++i) k_bad += gk[i] != k_want[i];
    for (size_t i = 0; i < gv.size(); ++i) v_bad += gv[i] != v_want[i];
    std::printf("  kv_store k %s v %s: %zu + %zu bytes differ from quantize_row\n",
                std::string(quant::type_name(kt)).c_str(),
                std::string(quant::type_name(vt)).c_str(), k_bad, v_bad);
    EXPECT_EQ(k_bad, 0u);
    EXPECT_EQ(v_bad, 0u);
  }
}

// The CPU refuses to quantize inf/NaN into a q8_0 cache; the GPU store
// reports it at synchronize, and the backend stays usable.
TEST(cuda_Ops, NonFiniteIntoAQ8_0CacheIsAnErrorAtSynchronize) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  const int64_t row = 64, n_ctx = 4;
  KvRegions kv;
  make_kv(*b.gpu, kF16, kQ8, n_ctx, row, encode_rows(kF16, std::vector<float>(n_ctx * row), row),
          encode_rows(kQ8, std::vector<float>(n_ctx * row), row), kv);
  Node store = make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, 1, row, 1, kF16, kQ8});
  auto k = random_floats(row, 1), v = random_floats(row, 2);
  v[37] = std::numeric_limits<float>::quiet_NaN();
  auto r =
      run_node(*b.gpu, store, {bytes_of(k), bytes_of(v), bytes_of(iota_positions(1, 2))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  std::printf("  %s\n", r.message().c_str());
  EXPECT_NE(r.message().find("non-finite"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("row 2"), std::string::npos) << r.message();
  v[37] = 0.5f;
  auto ok =
      run_node(*b.gpu, store, {bytes_of(k), bytes_of(v), bytes_of(iota_positions(1, 2))}, &kv.pair);
  EXPECT_TRUE(ok.is_ok()) << ok.message();
}

// FusedQKV stores its k and v rows (the post-RoPE values it also writes to
// its output) into q8_0 / mixed caches as the reference quantizer encodes them.
TEST(cuda_Ops, FusedQkvStoresTheCpuQuantizersBytes) {
  MINFER_SKIP_WITHOUT_CUDA();
  const int64_t in_dim = 128, n_head = 8, n_head_kv = 2, n_ctx = 8;
  for (int64_t head_dim : {64, 128, 256}) {
    const int64_t q_dim = n_head * head_dim, kv_row = n_head_kv * head_dim;
    Backends b;
    add_qkv_weights(b.weights, in_dim, q_dim, kv_row, 31);
    b.start();
    graph::FusedQkvMeta m = qkv_meta(in_dim, n_head, head_dim);
    const auto x = random_floats(in_dim, 34, 3.0f);
    const std::vector<int32_t> pos = {5};
    for (auto [kt, vt] : {std::pair{kQ8, kQ8}, {kF16, kQ8}, {kQ8, kF32}}) {
      SCOPED_TRACE(::testing::Message() << "hd " << head_dim << " " << quant::type_name(kt) << "/"
                                        << quant::type_name(vt));
      m.kv = graph::KvMeta{0, n_head_kv, head_dim, 1, kt, vt};
      Node n = make_node(Op::kFusedQKV, q_dim + 2 * kv_row, 1, m);
      ASSERT_TRUE(b.gpu->supports_op(n));
      const auto k_init = encode_rows(kt, random_floats(n_ctx * kv_row, 35), kv_row);
      const auto v_init = encode_rows(vt, random_floats(n_ctx * kv_row, 36), kv_row);
      KvRegions kv;
      make_kv(*b.gpu, kt, vt, n_ctx, kv_row, k_init, v_init, kv);
      auto out = run_node(*b.gpu, n, {bytes_of(x), bytes_of(pos)}, &kv.pair);
      ASSERT_TRUE(out.is_ok()) << out.message();
      const std::vector<float> k(out->begin() + q_dim, out->begin() + q_dim + kv_row);
      const std::vector<float> v(out->begin() + q_dim + kv_row, out->end());
      const auto k_row = encode_rows(kt, k, kv_row), v_row = encode_rows(vt, v, kv_row);
      std::vector<std::byte> k_want(k_init), v_want(v_init);
      std::copy(k_row.begin(), k_row.end(), k_want.begin() + pos[0] * k_row.size());
      std::copy(v_row.begin(), v_row.end(), v_want.begin() + pos[0] * v_row.size());
      EXPECT_TRUE(read_all(*b.gpu, kv.pair.k) == k_want) << "K bytes differ";
      EXPECT_TRUE(read_all(*b.gpu, kv.pair.v) == v_want) << "V bytes differ";
    }
  }
}

// K and V of F32, F16 or Q8_0, in any combination, run on the GPU; Q8_0 with
// a head_dim that is not a multiple of 32, or another type, is refused in
// supports_op (the node stays on the CPU) and is an error naming the types or
// numbers, never a misread, if handed over anyway.
TEST(cuda_Ops, KvCacheTypesItRunsAndRefuses) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  for (const char* name : {"wq", "wk", "wv"}) {
    add_weight(b.weights, name, TensorType::F32, 160, 64, random_floats(160 * 64, 3));
  }
  b.start();
  auto store_with = [](TensorType k, TensorType v, int64_t head_dim) {
    return make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, 1, head_dim, 1, k, v});
  };
  auto attention_with = [](TensorType k, TensorType v) {
    return make_node(Op::kAttention, 2 * 64, 1, attention_meta(2, 1, 64, k, v));
  };
  auto fused_with = [](TensorType k, TensorType v, int64_t head_dim) {
    graph::FusedQkvMeta m;
    m.q_weight = "wq";
    m.k_weight = "wk";
    m.v_weight = "wv";
    m.in_dim = 64;
    m.n_head = 160 / head_dim;
    m.rope.n_heads = m.n_head;
    m.rope.head_dim = head_dim;
    m.rope.n_rot = head_dim;
    m.kv = graph::KvMeta{0, 160 / head_dim, head_dim, 1, k, v};
    return make_node(Op::kFusedQKV, 3 * 160, 1, m);
  };
  for (TensorType k : {kF32, kF16, kQ8}) {
    for (TensorType v : {kF32, kF16, kQ8}) {
      SCOPED_TRACE(::testing::Message() << quant::type_name(k) << "/" << quant::type_name(v));
      EXPECT_TRUE(b.gpu->supports_op(store_with(k, v, 64)));
      EXPECT_TRUE(b.gpu->supports_op(attention_with(k, v)));
      EXPECT_TRUE(b.gpu->supports_op(fused_with(k, v, 32)));
      const bool q8 = k == kQ8 || v == kQ8;
      EXPECT_EQ(b.gpu->supports_op(store_with(k, v, 80)), !q8);
      EXPECT_EQ(b.gpu->supports_op(fused_with(k, v, 80)), !q8);
    }
  }
  for (auto [k, v] : {std::pair{TensorType::Q4_0, TensorType::Q4_0},
                      {TensorType::F16, TensorType::BF16},
                      {TensorType::Q8_1, TensorType::F32}}) {
    EXPECT_FALSE(b.gpu->supports_op(store_with(k, v, 64)));
    EXPECT_FALSE(b.gpu->supports_op(attention_with(k, v)));
    EXPECT_FALSE(b.gpu->supports_op(fused_with(k, v, 32)));
  }
  // A cache of other types than the node's meta says: errors that name the
  // numbers or the types.
  KvRegions kv;
  std::vector<float> zeros(4 * 80, 0.0f);
  make_kv(*b.gpu, DType::kF32, 4, 80, bytes_of(zeros), bytes_of(zeros), kv);
  kv.pair.k_type = kQ8;
  const auto row = random_floats(80, 1);
  auto r = run_node(*b.gpu, store_with(kF32, kF32, 80),
                    {bytes_of(row), bytes_of(row), bytes_of(iota_positions(1, 0))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  std::printf("  %s\n", r.message().c_str());
  EXPECT_NE(r.message().find("head_dim a multiple of 32, got 80"), std::string::npos)
      << r.message();
  kv.pair.k_type = kv.pair.v_type = TensorType::Q4_0;
  r = run_node(*b.gpu, attention_with(kF32, kF32),
               {bytes_of(random_floats(128, 2)), {}, bytes_of(iota_positions(1, 0))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  std::printf("  %s\n", r.message().c_str());
  EXPECT_NE(r.message().find("K Q4_0, V Q4_0 have no CUDA kernel"), std::string::npos)
      << r.message();
}

}  // namespace
}  // namespace minfer::cuda::testing
