// The CPU mixture-of-experts kernels (backend/cpu/moe.h) against plain
// scalar references (reference_ops.h, moe_testutil.h): selection and gating
// in double, the expert matmul as dequantized weights times dequantized
// activations (quantized to the weight's vec_dot_type here, as the kernel
// does) summed in double, the weighted sum in the order the contract states.
#include "backend/cpu/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "backend/backend_testutil.h"
#include "backend/cpu/vec_dot.h"
#include "backend/moe_testutil.h"
#include "backend/reference_ops.h"

namespace minfer::cpu {
namespace {

using backend::testing::encode_experts;
using backend::testing::EncodedExperts;
using backend::testing::ExpertMatmulReference;
using backend::testing::matmul_id_reference;
using backend::testing::moe_sum_reference;
using backend::testing::random_expert_ids;
using graph::MoeGating;
using quant::TensorType;
using testing::decode;
using testing::encode;
using testing::random_floats;
using testing::topk_ref;
using testing::weights_ref;

constexpr MoeGating kGatings[] = {MoeGating::kSoftmax, MoeGating::kSoftmaxNormalized,
                                  MoeGating::kTopKSoftmax};

TEST(MoeTopK, MatchesReferenceForEveryGating) {
  const int64_t n_tokens = 7, n_expert = 32, n_used = 4;
  const std::vector<float> logits = random_floats(n_tokens * n_expert, 11, 2.0f);
  for (MoeGating g : kGatings) {
    std::vector<int32_t> ids(n_tokens * n_used);
    ASSERT_TRUE(moe_topk(logits.data(), n_tokens, n_expert, n_used, g, ids.data()).is_ok());
    EXPECT_EQ(ids, topk_ref(logits, n_tokens, n_expert, n_used, g)) << static_cast<int>(g);
  }
}

TEST(MoeTopK, TiesGoToTheLowerId) {
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 2.0f, -1.0f};
  for (MoeGating g : kGatings) {
    std::vector<int32_t> ids(3);
    ASSERT_TRUE(moe_topk(logits.data(), 1, 6, 3, g, ids.data()).is_ok());
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 4}));
  }
}

TEST(MoeTopK, RefusesNaNAndBadSizes) {
  std::vector<float> logits = {0.0f, 1.0f, std::nanf(""), 2.0f};
  std::vector<int32_t> ids(2);
  Status s = moe_topk(logits.data(), 1, 4, 2, MoeGating::kSoftmax, ids.data());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("token 0"), std::string::npos) << s.message();
  EXPECT_FALSE(moe_topk(logits.data(), 1, 4, 5, MoeGating::kSoftmax, ids.data()).is_ok());
}

TEST(MoeWeights, MatchReferenceForEveryGating) {
  const int64_t n_tokens = 5, n_expert = 16, n_used = 4;
  const std::vector<float> logits = random_floats(n_tokens * n_expert, 12, 1.5f);
  for (MoeGating g : kGatings) {
    const std::vector<int32_t> ids = topk_ref(logits, n_tokens, n_expert, n_used, g);
    std::vector<float> w(n_tokens * n_used);
    ASSERT_TRUE(
        moe_weights(logits.data(), ids.data(), n_tokens, n_expert, n_used, g, w.data()).is_ok());
    const std::vector<double> want = weights_ref(logits, ids, n_tokens, n_expert, n_used, g);
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_NEAR(w[i], want[i], 1e-6 * std::max(1.0, want[i]))
          << "gating " << static_cast<int>(g) << " " << i;
    }
    if (g == MoeGating::kSoftmax) continue;
    for (int64_t t = 0; t < n_tokens; ++t) {  // these two sum to one per token
      EXPECT_NEAR(std::accumulate(w.begin() + t * n_used, w.begin() + (t + 1) * n_used, 0.0), 1.0,
                  1e-6);
    }
  }
}

TEST(MoeWeights, RefusesIdsOutOfRange) {
  const std::vector<float> logits(8, 0.0f);
  const std::vector<int32_t> ids = {0, 8};
  std::vector<float> w(2);
  Status s = moe_weights(logits.data(), ids.data(), 1, 8, 2, MoeGating::kSoftmax, w.data());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("expert id 8"), std::string::npos) << s.message();
}

// A random 3-D expert tensor (moe_testutil.h's encode_experts) and its view.
struct Experts {
  TensorType type;
  int64_t n_expert, rows, row_len;
  EncodedExperts encoded;

  ExpertWeights view() const {
    return {type, n_expert, rows, row_len, encoded.bytes.data(), encoded.expert_bytes, nullptr};
  }
};

Experts make_experts(TensorType type, int64_t n_expert, int64_t rows, int64_t row_len,
                     uint32_t seed) {
  return {type, n_expert, rows, row_len, encode_experts(type, n_expert, rows, row_len, seed, 0.1f)};
}

// The reference of matmul_id, x rounded through the weight's vec_dot_type
// first, as the kernel quantizes its input.
ExpertMatmulReference matmul_id_ref(const Experts& e, const std::vector<float>& x, bool per_row,
                                    const std::vector<int32_t>& ids, int64_t n_used) {
  const TensorType xt = *vec_dot_type(e.type);
  std::vector<float> rounded = x;
  if (xt != TensorType::F32) {
    const int64_t x_rows = static_cast<int64_t>(x.size()) / e.row_len;
    for (int64_t r = 0; r < x_rows; ++r) {
      const std::vector<float> row(x.begin() + r * e.row_len, x.begin() + (r + 1) * e.row_len);
      const std::vector<float> dec = decode(xt, encode(xt, row).data(), e.row_len);
      std::copy(dec.begin(), dec.end(), rounded.begin() + r * e.row_len);
    }
  }
  return matmul_id_reference(e.encoded.decoded, {}, rounded, ids, e.row_len, e.rows, n_used,
                             per_row);
}

void check_matmul_id(TensorType type, int64_t n_tokens, bool per_row) {
  SCOPED_TRACE(std::string(quant::type_name(type)) + " tokens " + std::to_string(n_tokens) +
               (per_row ? " per-row input" : " shared input"));
  const int64_t n_expert = 6, n_used = 2, rows = 48, row_len = 256;
  const Experts e = make_experts(type, n_expert, rows, row_len, 21);
  const int64_t x_rows = per_row ? n_tokens * n_used : n_tokens;
  const std::vector<float> x = random_floats(x_rows * row_len, 22);
  const std::vector<int32_t> ids = random_expert_ids(n_tokens, n_used, n_expert, 23);
  ThreadPool pool(2);
  MoeScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_tokens * n_used * rows));
  Status s =
      matmul_id(e.view(), x.data(), per_row, ids.data(), n_tokens, n_used, y.data(), pool, scratch);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const ExpertMatmulReference want = matmul_id_ref(e, x, per_row, ids, n_used);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], want.y[i], 1e-4 * want.magnitude[i] + 1e-6) << "output " << i;
  }
}

constexpr TensorType kTypes[] = {TensorType::Q4_K, TensorType::Q8_0,  TensorType::Q4_0,
                                 TensorType::F16,  TensorType::MXFP4, TensorType::Q6_K,
                                 TensorType::F32};

TEST(MatMulId, MatchesReferenceForEveryType) {
  for (TensorType type : kTypes) {
    for (int64_t n_tokens : {1, 3, 17}) {
      check_matmul_id(type, n_tokens, false);
      check_matmul_id(type, n_tokens, true);
    }
  }
}

TEST(MatMulId, AddsTheExpertsBias) {
  const int64_t n_expert = 4, n_used = 2, rows = 32, row_len = 64, n_tokens = 3;
  const Experts e = make_experts(TensorType::F32, n_expert, rows, row_len, 31);
  const std::vector<float> bias = random_floats(n_expert * rows, 32);
  const std::vector<float> x = random_floats(n_tokens * row_len, 33);
  const std::vector<int32_t> ids = random_expert_ids(n_tokens, n_used, n_expert, 34);
  ThreadPool pool(1);
  MoeScratch scratch;
  std::vector<float> plain(n_tokens * n_used * rows), biased(plain.size());
  ASSERT_TRUE(matmul_id(e.view(), x.data(), false, ids.data(), n_tokens, n_used, plain.data(), pool,
                        scratch)
                  .is_ok());
  ExpertWeights w = e.view();
  w.bias = bias.data();
  ASSERT_TRUE(
      matmul_id(w, x.data(), false, ids.data(), n_tokens, n_used, biased.data(), pool, scratch)
          .is_ok());
  for (int64_t r = 0; r < n_tokens * n_used; ++r) {
    for (int64_t o = 0; o < rows; ++o) {
      EXPECT_EQ(biased[r * rows + o], plain[r * rows + o] + bias[ids[r] * rows + o]);
    }
  }
}

// Batch-invariant: a token's rows are the same bits alone and in a batch
// whose other tokens share its experts.
TEST(MatMulId, BatchInvariantRowsDoNotDependOnTheBatch) {
  for (TensorType type : {TensorType::Q4_K, TensorType::Q8_0, TensorType::Q4_0}) {
    const int64_t n_expert = 4, n_used = 2, rows = 64, row_len = 256, n_tokens = 24;
    const Experts e = make_experts(type, n_expert, rows, row_len, 41);
    const std::vector<float> x = random_floats(n_tokens * row_len, 42);
    const std::vector<int32_t> ids = random_expert_ids(n_tokens, n_used, n_expert, 43);
    ThreadPool pool(2);
    MoeScratch scratch;
    const MatmulMode mode{true};
    std::vector<float> batch(n_tokens * n_used * rows);
    ASSERT_TRUE(matmul_id(e.view(), x.data(), false, ids.data(), n_tokens, n_used, batch.data(),
                          pool, scratch, mode)
                    .is_ok());
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> solo(n_used * rows);
      ASSERT_TRUE(matmul_id(e.view(), x.data() + t * row_len, false, ids.data() + t * n_used, 1,
                            n_used, solo.data(), pool, scratch, mode)
                      .is_ok());
      ASSERT_EQ(0, std::memcmp(solo.data(), batch.data() + t * n_used * rows,
                               solo.size() * sizeof(float)))
          << quant::type_name(type) << " token " << t;
    }
  }
}

// Many experts in use spread over the threads (each expert's matmul on one)
// and give the bits the one-thread, expert-after-expert run gives.
TEST(MatMulId, SpreadOverThreadsGivesTheSameBits) {
  for (TensorType type : {TensorType::Q4_K, TensorType::Q8_0, TensorType::F16}) {
    const int64_t n_expert = 16, n_used = 4, rows = 64, row_len = 256, n_tokens = 40;
    const Experts e = make_experts(type, n_expert, rows, row_len, 81);
    const std::vector<float> x = random_floats(n_tokens * row_len, 82);
    const std::vector<int32_t> ids = random_expert_ids(n_tokens, n_used, n_expert, 83);
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      MoeScratch scratch;
      std::vector<float> y(n_tokens * n_used * rows);
      ASSERT_TRUE(matmul_id(e.view(), x.data(), false, ids.data(), n_tokens, n_used, y.data(), pool,
                            scratch)
                      .is_ok());
      outs.push_back(std::move(y));
    }
    const ExpertMatmulReference want = matmul_id_ref(e, x, false, ids, n_used);
    for (size_t i = 0; i < want.y.size(); ++i) {
      ASSERT_NEAR(outs[0][i], want.y[i], 1e-4 * want.magnitude[i] + 1e-6)
          << quant::type_name(type) << " " << i;
    }
    EXPECT_EQ(outs[1], outs[0]) << quant::type_name(type);
    EXPECT_EQ(outs[2], outs[0]) << quant::type_name(type);
  }
}

// A token reads only its experts: the others may hold anything (NaN here).
TEST(MatMulId, ReadsOnlySelectedExperts) {
  const int64_t n_expert = 5, n_used = 2, rows = 16, row_len = 64;
  Experts e = make_experts(TensorType::F16, n_expert, rows, row_len, 51);
  const std::vector<int32_t> ids = {3, 1};
  for (int64_t x = 0; x < n_expert; ++x) {
    if (x == 3 || x == 1) continue;
    std::memset(e.encoded.bytes.data() + x * e.encoded.expert_bytes, 0xFF,
                e.encoded.expert_bytes);  // f16 NaNs
  }
  const std::vector<float> x = random_floats(row_len, 52);
  ThreadPool pool(1);
  MoeScratch scratch;
  std::vector<float> y(n_used * rows);
  ASSERT_TRUE(
      matmul_id(e.view(), x.data(), false, ids.data(), 1, n_used, y.data(), pool, scratch).is_ok());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(MatMulId, RefusesIdsOutOfRange) {
  const Experts e = make_experts(TensorType::F32, 2, 8, 32, 61);
  const std::vector<float> x(32, 1.0f);
  const std::vector<int32_t> ids = {0, -1};
  ThreadPool pool(1);
  MoeScratch scratch;
  std::vector<float> y(16);
  Status s = matmul_id(e.view(), x.data(), false, ids.data(), 1, 2, y.data(), pool, scratch);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("expert id -1"), std::string::npos) << s.message();
}

TEST(MoeSum, WeightsAndAddsInOrder) {
  const int64_t n_tokens = 3, n_used = 3, dim = 40;
  const std::vector<float> y = random_floats(n_tokens * n_used * dim, 71);
  const std::vector<float> w = random_floats(n_tokens * n_used, 72);
  std::vector<float> out(n_tokens * dim);
  moe_sum(y.data(), w.data(), n_tokens, n_used, dim, out.data());
  const std::vector<float> want = moe_sum_reference(y, w, n_tokens, n_used, dim);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_EQ(out[t * dim + i], want[t * dim + i]) << "token " << t << " element " << i;
    }
  }
}

}  // namespace
}  // namespace minfer::cpu
