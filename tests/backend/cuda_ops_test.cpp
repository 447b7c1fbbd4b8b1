// The CUDA backend's non-matmul ops against the CPU backend (same nodes, same
// inputs; the GPU path is f32 throughout) or, for attention, against a plain
// double-precision statement of the GPU path's semantics (the CPU follows
// llama.cpp's half-precision decode rows for f16 caches), at realistic shapes:
// element-wise ops, RMSNorm (rows and per-head groups), RoPE (NeoX and normal,
// partial rotation, frequency factors), KV store (f32 and f16 caches) and
// attention (GQA 7 and 8, head dims 64/128/256, sliding window, decode and
// prompt batches, reading earlier positions from the cache; batches of 8 or
// more tokens run the tiled flash kernel, split over the key range when its
// grid is small; shorter batches the per-token one). Tolerance: max abs diff
// < 1e-3 everywhere (both attention kernels are f32; measured values are
// printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "backend/backend_testutil.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda_testutil.h"
#include "quant/half.h"

namespace minfer::cuda::testing {
namespace {

using cpu::testing::random_floats;
using graph::DType;
using graph::Node;
using graph::Op;

constexpr double kTol = 1e-3;

struct Backends {
  model::Weights weights;
  std::unique_ptr<backend::Backend> gpu;
  std::unique_ptr<cpu::CpuBackend> cpu;
  void start() {
    auto g = create_backend(weights);
    ASSERT_TRUE(g.is_ok()) << g.message();
    gpu = std::move(g).value();
    cpu = std::make_unique<cpu::CpuBackend>(weights, 2);
  }
};

Node make_node(Op op, int64_t ne0, int64_t ne1, graph::NodeMeta meta = {}) {
  Node n;
  n.op = op;
  n.shape.ne = {ne0, ne1};
  n.meta = std::move(meta);
  n.name = std::string("test.") + graph::op_name(op);
  return n;
}

std::vector<int32_t> iota_positions(int64_t n, int32_t first) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
  return p;
}

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

struct AttnCase {
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_past, n_tokens;
  int64_t window;
  DType kv;
};

// KV store of a batch after n_past cached rows, then attention; both backends.
void check_attention(const AttnCase& c) {
  Backends b;
  b.start();
  const int64_t n_ctx = c.n_past + c.n_tokens + 8;
  const int64_t kv_row = c.n_head_kv * c.head_dim;
  // Earlier rows of the cache (positions < n_past), in the cache's type.
  const auto k_old = random_floats(n_ctx * kv_row, 10);
  const auto v_old = random_floats(n_ctx * kv_row, 11);
  auto cache_bytes = [&](const std::vector<float>& v) {
    if (c.kv == DType::kF32) return bytes_of(v);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = quant::f32_to_f16(v[i]);
    return bytes_of(h);
  };
  KvRegions gpu_kv, cpu_kv;
  make_kv(*b.gpu, c.kv, n_ctx, kv_row, cache_bytes(k_old), cache_bytes(v_old), gpu_kv);
  make_kv(*b.cpu, c.kv, n_ctx, kv_row, cache_bytes(k_old), cache_bytes(v_old), cpu_kv);
  const auto q = random_floats(c.n_head * c.head_dim * c.n_tokens, 12);
  const auto k = random_floats(kv_row * c.n_tokens, 13);
  const auto v = random_floats(kv_row * c.n_tokens, 14);
  const auto pos = iota_positions(c.n_tokens, static_cast<int32_t>(c.n_past));

  Node store = make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, c.n_head_kv, c.head_dim, c.n_tokens});
  graph::AttentionMeta am;
  am.n_head = c.n_head;
  am.n_head_kv = c.n_head_kv;
  am.head_dim = c.head_dim;
  am.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  am.sliding_window = c.window;
  Node attn = make_node(Op::kAttention, c.n_head * c.head_dim, c.n_tokens, am);
  const std::vector<std::vector<std::byte>> store_in = {bytes_of(k), bytes_of(v), bytes_of(pos)};
  ASSERT_TRUE(run_node(*b.gpu, store, store_in, &gpu_kv.pair).is_ok());
  ASSERT_TRUE(run_node(*b.cpu, store, store_in, &cpu_kv.pair).is_ok());
  EXPECT_EQ(read_all(*b.gpu, gpu_kv.pair.k), read_all(*b.cpu, cpu_kv.pair.k));
  EXPECT_EQ(read_all(*b.gpu, gpu_kv.pair.v), read_all(*b.cpu, cpu_kv.pair.v));
  const std::vector<std::vector<std::byte>> attn_in = {
      bytes_of(q), {}, bytes_of(pos), bytes_of(k), bytes_of(v)};
  auto got = run_node(*b.gpu, attn, attn_in, &gpu_kv.pair);
  ASSERT_TRUE(got.is_ok()) << got.message();
  // Reference: the GPU path's semantics (f32 query; keys at the batch's
  // positions from the batch's f32 k/v, earlier ones from the cache, f16
  // widened), with double sums.
  std::vector<float> cache_k(k_old), cache_v(v_old);
  if (c.kv == DType::kF16) {
    for (auto* vec : {&cache_k, &cache_v}) {
      for (float& f : *vec) f = quant::f16_to_f32(quant::f32_to_f16(f));
    }
  }
  std::vector<float> want(q.size());
  const int64_t group = c.n_head / c.n_head_kv;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const int64_t p = pos[t];
    const int64_t j0 = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
    for (int64_t h = 0; h < c.n_head; ++h) {
      const float* qh = q.data() + (t * c.n_head + h) * c.head_dim;
      const int64_t off = (h / group) * c.head_dim;
      auto key = [&](int64_t j) {
        return j >= c.n_past ? k.data() + (j - c.n_past) * kv_row + off
                             : cache_k.data() + j * kv_row + off;
      };
      auto val = [&](int64_t j) {
        return j >= c.n_past ? v.data() + (j - c.n_past) * kv_row + off
                             : cache_v.data() + j * kv_row + off;
      };
      std::vector<double> sc;
      double mx = -INFINITY;
      for (int64_t j = j0; j <= p; ++j) {
        double d = 0;
        for (int64_t i = 0; i < c.head_dim; ++i) d += double(qh[i]) * key(j)[i];
        sc.push_back(d * am.scale);
        mx = std::max(mx, sc.back());
      }
      double sum = 0;
      for (double& e : sc) sum += e = std::exp(e - mx);
      for (int64_t i = 0; i < c.head_dim; ++i) {
        double o = 0;
        for (int64_t j = j0; j <= p; ++j) o += sc[static_cast<size_t>(j - j0)] * val(j)[i];
        want[(t * c.n_head + h) * c.head_dim + i] = static_cast<float>(o / sum);
      }
    }
  }
  const double diff = max_abs_diff(*got, want);
  std::printf(
      "  attention heads %lld/%lld hd %lld past %lld n %lld window %lld kv %s: "
      "max diff %.2e\n",
      static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv),
      static_cast<long long>(c.head_dim), static_cast<long long>(c.n_past),
      static_cast<long long>(c.n_tokens), static_cast<long long>(c.window), graph::dtype_name(c.kv),
      diff);
  EXPECT_LT(diff, kTol);
}

TEST(cuda_Ops, KvStoreMatchesCpuAndAttentionItsReference) {
  MINFER_SKIP_WITHOUT_CUDA();
  const AttnCase cases[] = {
      {14, 2, 64, 0, 37, 0, DType::kF32},    // qwen2.5-0.5b prompt (GQA 7)
      {14, 2, 64, 300, 1, 0, DType::kF32},   // its decode step
      {14, 2, 64, 2000, 1, 0, DType::kF16},  // a decode step deep into the context
      {28, 4, 128, 200, 1, 0, DType::kF16},  // qwen2.5-7b decode, f16 cache (GQA 7)
      {28, 4, 128, 50, 20, 0, DType::kF16},  // a prompt chunk after cached rows
      {32, 4, 128, 130, 3, 0, DType::kF32},  // GQA 8
      {4, 1, 256, 90, 1, 64, DType::kF32},   // gemma3 270m local layer: window
      {4, 1, 256, 10, 80, 64, DType::kF16},  // window inside the batch
      {8, 8, 64, 5, 4, 0, DType::kF32},      // no GQA
      // Prompt batches of >= 8 tokens run the tiled (flash) kernel:
      {14, 2, 64, 0, 1024, 0, DType::kF16},     // 0.5b prompt, GQA 7, partial row tiles
      {28, 4, 128, 100, 300, 0, DType::kF16},   // 7b prompt chunk after cached rows
      {32, 4, 128, 0, 256, 0, DType::kF32},     // GQA 8
      {32, 8, 128, 40, 9, 0, DType::kF32},      // short chunk: key range starts mid-tile
      {8, 1, 256, 0, 600, 128, DType::kF16},    // gemma-like, window inside the batch
      {8, 1, 256, 200, 100, 128, DType::kF32},  // window reaching into the cache
      {4, 4, 32, 3, 70, 0, DType::kF32},        // head dim 32, no GQA
      {6, 2, 96, 0, 33, 20, DType::kF32},       // head dim 96
      // Few blocks: the key range is split over several blocks, then merged.
      {14, 2, 64, 2000, 12, 0, DType::kF16},    // prompt tail after a long context
      {28, 4, 128, 1500, 40, 0, DType::kF32},   // 7b shape
      {8, 1, 256, 1000, 20, 128, DType::kF16},  // window: most splits empty
  };
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "heads " << c.n_head << "/" << c.n_head_kv << " hd "
                                      << c.head_dim << " past " << c.n_past << " n " << c.n_tokens);
    check_attention(c);
  }
}

TEST(cuda_Ops, RefusesWhatItCannotRun) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  graph::AttentionMeta am;
  am.n_head = 4;
  am.n_head_kv = 1;
  am.head_dim = 80;  // no kernel
  Node attn = make_node(Op::kAttention, 4 * 80, 1, am);
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

}  // namespace
// The CUDA kernels read only f32 or f16 caches with K and V alike: a q8_0 or
// mixed cache is refused in supports_op (so attention stays on the CPU, which
// owns such a cache) and is an error, never a misread, if handed over anyway.
TEST(cuda_Ops, RefusesQuantizedOrMixedKvCaches) {
  MINFER_SKIP_WITHOUT_CUDA();
  Backends b;
  b.start();
  using quant::TensorType;
  auto store_with = [](TensorType k, TensorType v) {
    return make_node(Op::kKvStore, 0, 0, graph::KvMeta{0, 1, 64, 1, k, v});
  };
  auto attention_with = [](TensorType k, TensorType v) {
    graph::AttentionMeta am;
    am.n_head = 2;
    am.n_head_kv = 1;
    am.head_dim = 64;
    am.k_type = k;
    am.v_type = v;
    return make_node(Op::kAttention, 2 * 64, 1, am);
  };
  for (auto [k, v] : {std::pair{TensorType::Q8_0, TensorType::Q8_0},
                      {TensorType::F16, TensorType::Q8_0},
                      {TensorType::F32, TensorType::F16}}) {
    EXPECT_FALSE(b.gpu->supports_op(store_with(k, v)));
    EXPECT_FALSE(b.gpu->supports_op(attention_with(k, v)));
  }
  for (TensorType t : {TensorType::F32, TensorType::F16}) {
    EXPECT_TRUE(b.gpu->supports_op(store_with(t, t)));
    EXPECT_TRUE(b.gpu->supports_op(attention_with(t, t)));
  }
  KvRegions kv;
  std::vector<float> zeros(4 * 64, 0.0f);
  make_kv(*b.gpu, DType::kF32, 4, 64, bytes_of(zeros), bytes_of(zeros), kv);
  kv.pair.k_type = kv.pair.v_type = TensorType::Q8_0;
  const auto row = random_floats(64, 1);
  auto r = run_node(*b.gpu, store_with(TensorType::Q8_0, TensorType::Q8_0),
                    {bytes_of(row), bytes_of(row), bytes_of(iota_positions(1, 0))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("K Q8_0, V Q8_0 have no CUDA kernel"), std::string::npos)
      << r.message();
  r = run_node(*b.gpu, attention_with(TensorType::Q8_0, TensorType::Q8_0),
               {bytes_of(random_floats(128, 2)), {}, bytes_of(iota_positions(1, 0))}, &kv.pair);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.message().find("have no CUDA kernel"), std::string::npos) << r.message();
}

}  // namespace minfer::cuda::testing
