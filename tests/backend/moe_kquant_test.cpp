// The Q4_K/Q6_K expert matmul (backend/cpu/moe.h's matmul_id; on AVX-512
// VNNI CPUs its direct path, backend/cpu/moe_kquant_vnni.h) against the
// plain definition (dequantized weights times the Q8_K-rounded activations,
// summed in double) and against itself: a token's rows are the same bits
// alone and in any batch whose experts take the direct path, with any
// thread count, and when the prepared input of the previous call is reused
// (a layer's gate and up read one input). Covers rows not a multiple of the
// 4-row pass, 1 to 13 tokens per expert (from 12 an expert goes to
// matmul()), shared and per-row inputs, the bias, and the error for a
// non-finite activation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_gemm_vnni.h"
#include "backend/cpu/moe.h"
#include "backend/moe_testutil.h"
#include "quant/reference.h"

namespace minfer::cpu {
namespace {

using backend::testing::encode_experts;
using backend::testing::EncodedExperts;
using backend::testing::ExpertMatmulReference;
using backend::testing::matmul_id_reference;
using backend::testing::random_expert_ids;
using quant::TensorType;
using testing::decode;
using testing::encode;
using testing::random_floats;

struct Case {
  TensorType type;
  int64_t n_expert, rows, row_len, n_used;
  EncodedExperts encoded;
  std::vector<float> bias;

  ExpertWeights view(bool with_bias) const {
    return {type,
            n_expert,
            rows,
            row_len,
            encoded.bytes.data(),
            encoded.expert_bytes,
            with_bias ? bias.data() : nullptr};
  }
};

Case make_case(TensorType type, int64_t n_expert, int64_t rows, int64_t row_len, int64_t n_used,
               uint32_t seed) {
  return {type,
          n_expert,
          rows,
          row_len,
          n_used,
          encode_experts(type, n_expert, rows, row_len, seed, 0.1f),
          random_floats(n_expert * rows, seed + 1)};
}

std::vector<float> run(const Case& c, const std::vector<float>& x, bool per_row,
                       const std::vector<int32_t>& ids, bool with_bias, int threads,
                       MoeScratch& scratch) {
  const auto n_rows = static_cast<int64_t>(ids.size());
  std::vector<float> y(static_cast<size_t>(n_rows * c.rows));
  ThreadPool pool(threads);
  const Status s = matmul_id(c.view(with_bias), x.data(), per_row, ids.data(), n_rows / c.n_used,
                             c.n_used, y.data(), pool, scratch);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return y;
}

// The reference with x rounded through Q8_K, as the kernels quantize it.
ExpertMatmulReference reference(const Case& c, const std::vector<float>& x, bool per_row,
                                const std::vector<int32_t>& ids, bool with_bias) {
  std::vector<float> rounded = x;
  for (size_t r = 0; r < x.size() / static_cast<size_t>(c.row_len); ++r) {
    const std::vector<float> row(x.begin() + r * c.row_len, x.begin() + (r + 1) * c.row_len);
    const std::vector<float> dec =
        decode(TensorType::Q8_K, encode(TensorType::Q8_K, row).data(), c.row_len);
    std::copy(dec.begin(), dec.end(), rounded.begin() + r * c.row_len);
  }
  return matmul_id_reference(c.encoded.decoded, with_bias ? c.bias : std::vector<float>{}, rounded,
                             ids, c.row_len, c.rows, c.n_used, per_row);
}

void check(TensorType type, int64_t n_tokens, bool per_row, bool with_bias, int threads) {
  SCOPED_TRACE(std::string(quant::type_name(type)) + " tokens " + std::to_string(n_tokens) +
               (per_row ? " per-row" : " shared") + (with_bias ? " bias" : "") + " threads " +
               std::to_string(threads));
  const Case c = make_case(type, 5, 70, 512, 2, 101);
  const std::vector<float> x =
      random_floats((per_row ? n_tokens * c.n_used : n_tokens) * c.row_len, 102);
  const std::vector<int32_t> ids = random_expert_ids(n_tokens, c.n_used, c.n_expert, 103);
  MoeScratch scratch;
  const std::vector<float> y = run(c, x, per_row, ids, with_bias, threads, scratch);
  const ExpertMatmulReference want = reference(c, x, per_row, ids, with_bias);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], want.y[i], 1e-5 * want.magnitude[i] + 1e-6) << "output " << i;
  }
}

TEST(MoeKQuant, MatchesReference) {
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    for (int64_t n_tokens : {1, 2, 5, 13, 40}) {
      check(type, n_tokens, false, false, 2);
      check(type, n_tokens, true, true, 1);
    }
  }
}

// Without batch invariance asked for, a token's rows still do not depend on
// its batch while its experts take the direct path, nor on the threads.
TEST(MoeKQuant, RowsDoNotDependOnTheBatchOrTheThreads) {
  if (active_isa() != Isa::kAvx2 || !vnni_gemm_available()) {
    GTEST_SKIP() << "the direct path needs AVX-512 VNNI";
  }
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
    SCOPED_TRACE(quant::type_name(type));
    const Case c = make_case(type, 8, 36, 768, 2, 111);
    const int64_t n_tokens = 12;  // at most 3 rows per expert (ids below)
    const std::vector<float> x = random_floats(n_tokens * c.row_len, 112);
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < n_tokens; ++t) {
      ids.push_back(static_cast<int32_t>(t % 8));
      ids.push_back(static_cast<int32_t>((t + 3) % 8));
    }
    MoeScratch scratch;
    const std::vector<float> batch = run(c, x, false, ids, true, 2, scratch);
    for (int threads : {1, 3}) {
      MoeScratch other;
      EXPECT_EQ(run(c, x, false, ids, true, threads, other), batch) << threads << " threads";
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::vector<float> xt(x.begin() + t * c.row_len, x.begin() + (t + 1) * c.row_len);
      const std::vector<int32_t> it(ids.begin() + t * 2, ids.begin() + (t + 1) * 2);
      const std::vector<float> solo = run(c, xt, false, it, true, 2, scratch);
      ASSERT_EQ(
          0, std::memcmp(solo.data(), batch.data() + t * 2 * c.rows, solo.size() * sizeof(float)))
          << "token " << t;
    }
  }
}

// The prepared input kept from the previous call serves the next only for
// the same bits and layout: gate then up (same x), then another x of the
// same size, then a Q6_K weight (another layout) on the first x.
TEST(MoeKQuant, ReusedInputGivesFreshBits) {
  const Case gate = make_case(TensorType::Q4_K, 6, 40, 512, 2, 121);
  const Case up = make_case(TensorType::Q4_K, 6, 40, 512, 2, 122);
  const Case q6 = make_case(TensorType::Q6_K, 6, 40, 512, 2, 123);
  const std::vector<float> x1 = random_floats(3 * 512, 124), x2 = random_floats(3 * 512, 125);
  const std::vector<int32_t> ids = random_expert_ids(3, 2, 6, 126);
  MoeScratch shared;
  const std::vector<std::pair<const Case*, const std::vector<float>*>> calls = {
      {&gate, &x1}, {&up, &x1}, {&up, &x2}, {&q6, &x2}, {&q6, &x1}, {&gate, &x1}};
  for (size_t i = 0; i < calls.size(); ++i) {
    MoeScratch fresh;
    const auto [c, x] = calls[i];
    EXPECT_EQ(run(*c, *x, false, ids, false, 2, shared), run(*c, *x, false, ids, false, 2, fresh))
        << "call " << i;
  }
}

TEST(MoeKQuant, NonFiniteActivationIsAnErrorNamingTheRow) {
  const Case c = make_case(TensorType::Q4_K, 3, 8, 256, 2, 131);
  std::vector<float> x = random_floats(2 * 256, 132);
  x[256 + 7] = std::nanf("");
  const std::vector<int32_t> ids = {0, 1, 2, 0};
  ThreadPool pool(2);
  MoeScratch scratch;
  std::vector<float> y(4 * 8);
  const Status s =
      matmul_id(c.view(false), x.data(), false, ids.data(), 2, 2, y.data(), pool, scratch);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("activation row"), std::string::npos) << s.message();
}

// One decode token's expert matmuls of a Qwen3-30B-A3B layer (gate and up
// Q4_K [768 x 2048], down Q6_K or Q4_K [2048 x 768], 8 of 128 experts at
// random) on 2 threads, from DRAM: 5 layers of experts (about 2 GB) in
// turn. Prints the median and 10th-percentile time of a layer and the
// token's expert bytes over the median (docs/PERFORMANCE.md, "Mixture of
// experts"). By hand:
// --gtest_also_run_disabled_tests --gtest_filter='*MoeKQuantTiming*'.
TEST(MoeKQuantTiming, DISABLED_Qwen3DecodeLayer) {
  constexpr int64_t kExperts = 128, kUsed = 8, kDim = 2048, kFfn = 768, kLayers = 5;
  struct Tensor {
    std::vector<uint8_t> bytes;
    ExpertWeights w;
  };
  // One random expert copied to all, each copy with a byte changed so that
  // no two share their pages' contents.
  const auto make = [](TensorType type, int64_t rows, int64_t row_len, uint32_t seed) {
    const std::vector<float> v = random_floats(rows * row_len, seed, 0.05f);
    const size_t rb = quant::row_bytes(type, row_len).value();
    std::vector<uint8_t> one(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(
          quant::quantize_row(type, v.data() + r * row_len, one.data() + r * rb, row_len).is_ok());
    }
    Tensor t;
    t.bytes.resize(one.size() * kExperts);
    for (int64_t e = 0; e < kExperts; ++e) {
      std::copy(one.begin(), one.end(), t.bytes.begin() + e * static_cast<int64_t>(one.size()));
      t.bytes[e * one.size() + 17] ^= static_cast<uint8_t>(e);
    }
    t.w = {type, kExperts, rows, row_len, t.bytes.data(), one.size(), nullptr};
    return t;
  };
  for (TensorType down_type : {TensorType::Q6_K, TensorType::Q4_K}) {
    std::vector<Tensor> gate, up, down;
    for (int64_t l = 0; l < kLayers; ++l) {
      gate.push_back(make(TensorType::Q4_K, kFfn, kDim, 1 + l));
      up.push_back(make(TensorType::Q4_K, kFfn, kDim, 11 + l));
      down.push_back(make(down_type, kDim, kFfn, 21 + l));
    }
    ThreadPool pool(2);
    MoeScratch scratch;
    const std::vector<float> x = random_floats(kDim, 31);
    std::vector<float> g(kUsed * kFfn), u(g.size()), y(kUsed * kDim);
    std::mt19937 rng(32);
    std::vector<double> times;
    for (int it = 0; it < 600; ++it) {
      const std::vector<int32_t> ids = random_expert_ids(1, kUsed, kExperts, rng());
      const int64_t l = it % kLayers;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(
          matmul_id(gate[l].w, x.data(), false, ids.data(), 1, kUsed, g.data(), pool, scratch)
              .is_ok());
      ASSERT_TRUE(matmul_id(up[l].w, x.data(), false, ids.data(), 1, kUsed, u.data(), pool, scratch)
                      .is_ok());
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] * u[i] * 0.1f;
      ASSERT_TRUE(
          matmul_id(down[l].w, g.data(), true, ids.data(), 1, kUsed, y.data(), pool, scratch)
              .is_ok());
      const auto t1 = std::chrono::steady_clock::now();
      if (it >= 30) times.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double bytes =
        static_cast<double>(kUsed * (2 * gate[0].w.expert_bytes + down[0].w.expert_bytes));
    std::printf("down %s: median %.1f us, p10 %.1f us, %.1f GB/s of %.2f MB (median)\n",
                std::string(quant::type_name(down_type)).c_str(), times[times.size() / 2] * 1e6,
                times[times.size() / 10] * 1e6, bytes / times[times.size() / 2] / 1e9, bytes / 1e6);
  }
}

}  // namespace
}  // namespace minfer::cpu
