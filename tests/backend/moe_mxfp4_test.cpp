// The MXFP4 expert matmul (backend/cpu/moe.h's matmul_id; on AVX-512 VNNI
// CPUs its direct path, backend/cpu/moe_mxfp4_vnni.h) against the plain
// definition it must equal bit for bit: each expert's rows gathered and run
// through backend/cpu/matmul.h's matmul(), plus the bias. Covers every tile
// shape (rows not a multiple of the 4-row pass, 1 to 8 tokens per expert),
// shared and per-row inputs, one and two threads, the batch-invariant mode,
// and the error for a non-finite activation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testutil.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/moe.h"
#include "backend/moe_testutil.h"

namespace minfer::cpu {
namespace {

using backend::testing::encode_experts;
using backend::testing::EncodedExperts;
using backend::testing::random_expert_ids;
using quant::TensorType;
using testing::random_floats;

// matmul_id as gather, matmul() per expert, scatter and bias.
std::vector<float> per_expert_matmul(const ExpertWeights& w, const std::vector<float>& x,
                                     bool per_row, const std::vector<int32_t>& ids,
                                     int64_t n_used) {
  const auto n_rows = static_cast<int64_t>(ids.size());
  std::vector<float> y(static_cast<size_t>(n_rows * w.rows));
  ThreadPool pool(1);
  std::vector<uint8_t> scratch;
  for (int64_t e = 0; e < w.n_expert; ++e) {
    std::vector<int64_t> mine;
    for (int64_t r = 0; r < n_rows; ++r) {
      if (ids[r] == e) mine.push_back(r);
    }
    if (mine.empty()) continue;
    std::vector<float> xs, ys(mine.size() * static_cast<size_t>(w.rows));
    for (int64_t r : mine) {
      const int64_t src = per_row ? r : r / n_used;
      xs.insert(xs.end(), x.begin() + src * w.row_len, x.begin() + (src + 1) * w.row_len);
    }
    const MatmulWeight mw{w.type, w.rows, w.row_len,
                          static_cast<const uint8_t*>(w.data) + e * w.expert_bytes, 0};
    EXPECT_TRUE(
        matmul(mw, xs.data(), static_cast<int64_t>(mine.size()), ys.data(), pool, scratch).is_ok());
    for (size_t i = 0; i < mine.size(); ++i) {
      for (int64_t o = 0; o < w.rows; ++o) {
        const float v = ys[i * w.rows + o];
        y[mine[i] * w.rows + o] = w.bias != nullptr ? v + w.bias[e * w.rows + o] : v;
      }
    }
  }
  return y;
}

void check(int64_t n_tokens, bool per_row, bool with_bias, int threads, bool batch_invariant) {
  SCOPED_TRACE("tokens " + std::to_string(n_tokens) + (per_row ? " per-row" : " shared") +
               (with_bias ? " bias" : "") + " threads " + std::to_string(threads) +
               (batch_invariant ? " invariant" : ""));
  const int64_t n_expert = 5, n_used = 2, rows = 70, row_len = 160;
  const EncodedExperts enc = encode_experts(TensorType::MXFP4, n_expert, rows, row_len, 91, 0.1f);
  const std::vector<float> bias = random_floats(n_expert * rows, 92);
  ExpertWeights w{TensorType::MXFP4,
                  n_expert,
                  rows,
                  row_len,
                  enc.bytes.data(),
                  enc.expert_bytes,
                  with_bias ? bias.data() : nullptr};
  const std::vector<float> x =
      random_floats((per_row ? n_tokens * n_used : n_tokens) * row_len, 93);
  const std::vector<int32_t> ids = random_expert_ids(n_tokens, n_used, n_expert, 94);
  ThreadPool pool(threads);
  MoeScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_tokens * n_used * rows));
  ASSERT_TRUE(matmul_id(w, x.data(), per_row, ids.data(), n_tokens, n_used, y.data(), pool, scratch,
                        MatmulMode{batch_invariant})
                  .is_ok());
  const std::vector<float> want = per_expert_matmul(w, x, per_row, ids, n_used);
  ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)));
}

TEST(MoeMxfp4, EqualsMatmulPerExpertBitForBit) {
  for (int64_t n_tokens : {1, 2, 3, 4, 5, 8, 13}) {
    for (bool per_row : {false, true}) {
      check(n_tokens, per_row, false, 2, false);
      check(n_tokens, per_row, true, 1, false);
    }
  }
  check(9, false, true, 2, true);
}

TEST(MoeMxfp4, NonFiniteActivationIsAnErrorNamingTheRow) {
  const int64_t n_expert = 3, n_used = 2, rows = 8, row_len = 64;
  const EncodedExperts enc = encode_experts(TensorType::MXFP4, n_expert, rows, row_len, 95, 0.1f);
  const ExpertWeights w{TensorType::MXFP4, n_expert,         rows,   row_len,
                        enc.bytes.data(),  enc.expert_bytes, nullptr};
  std::vector<float> x = random_floats(2 * row_len, 96);
  x[row_len + 5] = std::nanf("");
  const std::vector<int32_t> ids = {0, 1, 2, 0};
  ThreadPool pool(2);
  MoeScratch scratch;
  std::vector<float> y(4 * rows);
  const Status s = matmul_id(w, x.data(), false, ids.data(), 2, n_used, y.data(), pool, scratch);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("activation row"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::cpu
