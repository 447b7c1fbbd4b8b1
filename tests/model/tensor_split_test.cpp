// The split of a model's weights over tensor-parallel ranks
// (model/tensor_split.h): the ranks' parts put back together are the whole
// tensor, byte for byte where the cut falls on quantization blocks and value
// for value (dequantized) where it does not; whole tensors stay views.
#include "model/tensor_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/forward_testutil.h"
#include "quant/reference.h"

namespace minfer::model {
namespace {

using testing::synth_model;

std::vector<RankModel> parts_of(const Model& m, int ranks) {
  std::vector<RankModel> parts;
  for (int r = 0; r < ranks; ++r) {
    auto p = split_for_rank(m.hparams(), m.weights(), r, ranks);
    EXPECT_TRUE(p.is_ok()) << p.message();
    if (p) parts.push_back(std::move(*p));
  }
  return parts;
}

std::vector<float> dequantized(const WeightView& v) {
  std::vector<float> out(static_cast<size_t>(v.row_length() * v.rows()));
  for (int64_t r = 0; r < v.rows(); ++r) {
    EXPECT_TRUE(quant::dequantize_row(v.type, v.data + r * v.row_bytes(),
                                      out.data() + r * v.row_length(), v.row_length())
                    .is_ok());
  }
  return out;
}

TEST(TensorSplit, RowCutsAreContiguousViewsThatTileTheTensor) {
  auto m = synth_model("tiny-qwen2", "Q4_K_M");
  ASSERT_TRUE(m.is_ok()) << m.message();
  const WeightView* q = (*m)->weights().find("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  std::vector<uint8_t> joined;
  for (const RankModel& p : parts_of(**m, 4)) {
    const WeightView* part = p.weights.find(q->name);
    ASSERT_NE(part, nullptr);
    EXPECT_EQ(part->dims, (std::vector<int64_t>{q->dims[0], q->dims[1] / 4}));
    EXPECT_GE(part->data, q->data);  // a view into the file, not a copy
    EXPECT_LE(part->data + part->nbytes, q->data + q->nbytes);
    joined.insert(joined.end(), part->data, part->data + part->nbytes);
    EXPECT_EQ(p.hp.n_head, (*m)->hparams().n_head / 4);
  }
  ASSERT_EQ(joined.size(), q->nbytes);
  EXPECT_EQ(std::memcmp(joined.data(), q->data, q->nbytes), 0);
}

// ffn_down's rows cut in 2 are whole K-quant blocks (256 values), kept as they
// are; cut in 4 (128 values) they fall inside the blocks and are re-encoded
// as Q8_0, each value within one Q8_0 step (its 32-block's largest / 127).
TEST(TensorSplit, ElementCutsKeepBlocksOrReencode) {
  auto m = synth_model("tiny-qwen2", "Q4_K_M");
  ASSERT_TRUE(m.is_ok()) << m.message();
  const WeightView* down = (*m)->weights().find("blk.1.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  ASSERT_EQ(quant::type_traits(down->type).block_size, 256);  // Q4_K or Q6_K
  const std::vector<float> whole = dequantized(*down);
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    const std::vector<RankModel> parts = parts_of(**m, ranks);
    const int64_t n = down->row_length() / ranks;
    for (int r = 0; r < ranks; ++r) {
      const WeightView* part = parts[static_cast<size_t>(r)].weights.find(down->name);
      ASSERT_NE(part, nullptr);
      EXPECT_EQ(part->type, ranks == 2 ? down->type : quant::TensorType::Q8_0);
      const std::vector<float> got = dequantized(*part);
      int64_t off = 0;
      for (int64_t row = 0; row < down->rows(); ++row) {
        const float* want = whole.data() + row * down->row_length() + r * n;
        for (int64_t b = 0; b < n; b += 32) {
          float amax = 0;
          for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(want[i]));
          const float step = ranks == 2 ? 0.0f : amax / 127.0f;
          for (int64_t i = b; i < b + 32; ++i) {
            off += std::fabs(got[static_cast<size_t>(row * n + i)] - want[i]) > step;
          }
        }
      }
      EXPECT_EQ(off, 0) << "values of rank " << r << " off by more than a step";
    }
  }
}

// Fewer KV heads than ranks: each rank keeps the KV head its query heads use.
TEST(TensorSplit, KvHeadsAreSharedWhenFewerThanRanks) {
  auto m = synth_model("tiny-llama", "F32");
  ASSERT_TRUE(m.is_ok()) << m.message();
  const HParams& hp = (*m)->hparams();
  ASSERT_EQ(hp.n_head_kv, 2);
  const WeightView* k = (*m)->weights().find("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  const std::vector<RankModel> parts = parts_of(**m, 4);
  for (int r = 0; r < 4; ++r) {
    const WeightView* part = parts[static_cast<size_t>(r)].weights.find(k->name);
    ASSERT_NE(part, nullptr);
    EXPECT_EQ(parts[static_cast<size_t>(r)].hp.n_head_kv, 1);
    const int64_t head = r / 2;  // query heads 0-1 read KV head 0, 2-3 KV head 1
    EXPECT_EQ(part->data, k->data + head * hp.head_dim * k->row_bytes()) << "rank " << r;
  }
}

TEST(TensorSplit, WholeTensorsStayViewsAndBiasesOfCutInputsAreNamed) {
  auto m = synth_model("tiny-gpt-oss", "Q8_0");
  ASSERT_TRUE(m.is_ok()) << m.message();
  const std::vector<RankModel> parts = parts_of(**m, 2);
  for (const char* name : {"token_embd.weight", "blk.0.attn_norm.weight",
                           "blk.0.ffn_gate_inp.weight", "blk.0.attn_output.bias"}) {
    const WeightView* whole = (*m)->weights().find(name);
    ASSERT_NE(whole, nullptr) << name;
    EXPECT_EQ(parts[1].weights.find(name)->data, whole->data) << name;
  }
  EXPECT_TRUE(input_split("blk.3.attn_output.weight"));
  EXPECT_TRUE(input_split("blk.3.ffn_down.weight"));
  EXPECT_TRUE(input_split("blk.3.ffn_down_exps.weight"));
  EXPECT_FALSE(input_split("blk.3.ffn_up.weight"));
  EXPECT_FALSE(input_split("output.weight"));
}

TEST(TensorSplit, RefusalsNameTheCountThatDoesNotDivide) {
  HParams hp;
  hp.n_head = 8;
  hp.n_head_kv = 4;
  hp.n_ff = 96;
  EXPECT_TRUE(check_split(hp, 4).is_ok());
  const Status heads = check_split(hp, 3);
  EXPECT_NE(heads.message().find("query heads (8) to divide by 3"), std::string::npos)
      << heads.message();
  hp.n_head_kv = 3;
  hp.n_head = 12;
  const Status kv = check_split(hp, 4);
  EXPECT_NE(kv.message().find("KV heads"), std::string::npos) << kv.message();
  hp.n_head_kv = 4;
  hp.n_ff = 90;
  const Status ff = check_split(hp, 4);
  EXPECT_NE(ff.message().find("FFN width (90)"), std::string::npos) << ff.message();
  EXPECT_FALSE(check_split(hp, 0).is_ok());
}

}  // namespace
}  // namespace minfer::model
