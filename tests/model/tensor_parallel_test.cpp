// Tensor parallelism on the CPU (docs/PARALLEL.md): every architecture's
// logits over 2 and 4 in-process ranks against one rank, for a prompt and
// decode steps, on F32 files (only the order of additions differs: the ranks'
// partial sums) and quantized ones (the same blocks are multiplied; a cut
// inside a K-quant's 256 block is dequantized to F32, which moves more).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/builder.h"
#include "model/forward_testutil.h"
#include "model/tensor_split.h"
#include "runtime/session.h"

namespace minfer::model {
namespace {

using testing::compare_logits;
using testing::eval_positions;
using testing::synth_model;

// Every position's logits of a 20-token prompt (one eval of 16, then one
// token per eval) over `ranks` ranks.
std::vector<float> logits(const Model& m, int ranks) {
  runtime::SessionOptions o;
  o.n_threads = 2;
  o.n_ctx = 64;
  o.gpu = false;
  o.k_type = o.v_type = quant::TensorType::F32;
  o.tensor_parallel = ranks;
  auto s = runtime::Session::create(m, o);
  EXPECT_TRUE(s.is_ok()) << s.message();
  if (!s) return {};
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back(3 + (i * 37) % 250);
  auto out = eval_positions(**s, tokens, 16);
  EXPECT_TRUE(out.is_ok()) << out.message();
  return out ? *out : std::vector<float>{};
}

struct Case {
  const char* shape;
  const char* quant;
  double max_rel;   // max |tp - one| over a row / that row's range, worst row
  double min_top1;  // rows whose greedy token agrees
};

// F32: only the order of additions differs (rel <= 1.1e-5, Gemma's extra
// norms the most). Q8_0: the same blocks, the same sums. Q4_K_M: at 4 ranks
// the FFN's 128-value cuts fall inside Q4_K's 256-blocks and are re-encoded
// as Q8_0, which moves the logits a little and can flip a MoE router's
// near-tie (docs/PARALLEL.md, "Numerics").
const Case kCases[] = {
    {"tiny-qwen2", "F32", 1e-4, 1.0},      {"tiny-qwen3", "F32", 1e-4, 1.0},
    {"tiny-llama", "F32", 1e-4, 1.0},      {"tiny-gemma3", "F32", 1e-4, 1.0},
    {"tiny-qwen3moe", "F32", 1e-4, 1.0},   {"tiny-gpt-oss", "F32", 1e-4, 1.0},
    {"tiny-qwen2", "Q8_0", 1e-4, 1.0},     {"tiny-gpt-oss", "Q8_0", 1e-4, 1.0},
    {"tiny-gpt-oss", "MXFP4", 1e-4, 1.0},  {"tiny-qwen3", "Q4_K_M", 0.1, 0.9},
    {"tiny-qwen3moe", "Q4_K_M", 0.3, 0.8},
};

TEST(TensorParallel, LogitsOfEveryArchitectureMatchOneRank) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.shape) + " " + c.quant);
    auto m = synth_model(c.shape, c.quant);
    ASSERT_TRUE(m.is_ok()) << m.message();
    const std::vector<float> one = logits(**m, 1);
    ASSERT_FALSE(one.empty());
    for (int ranks : {2, 4}) {
      const auto [rel, top1] = compare_logits(one, logits(**m, ranks), (*m)->hparams().n_vocab);
      std::printf("%s %s tp %d: rel %.2e top1 %.3f\n", c.shape, c.quant, ranks, rel, top1);
      EXPECT_LE(rel, c.max_rel) << ranks << " ranks";
      EXPECT_GE(top1, c.min_top1) << ranks << " ranks";
    }
  }
}

// The graph of a rank: an all-reduce after each projection cut along its
// input, an all-gather of the vocabulary's rows, nothing else added.
TEST(TensorParallel, TheGraphSumsEachCutProjection) {
  auto m = synth_model("tiny-qwen2", "F32");
  ASSERT_TRUE(m.is_ok()) << m.message();
  auto part = split_for_rank((*m)->hparams(), (*m)->weights(), 0, 2);
  ASSERT_TRUE(part.is_ok()) << part.message();
  GraphParams one_rank;  // rank 0's part built as if it were the whole model
  auto g = build_graph(part->hp, part->weights, one_rank);
  ASSERT_TRUE(g.is_ok()) << g.message();
  GraphParams two_ranks;
  two_ranks.tp_ranks = 2;
  auto g2 = build_graph(part->hp, part->weights, two_ranks);
  ASSERT_TRUE(g2.is_ok()) << g2.message();
  int reduces = 0, gathers = 0;
  for (const graph::Node& n : g2->nodes) {
    reduces += n.op == graph::Op::kAllReduce;
    gathers += n.op == graph::Op::kAllGather;
  }
  // attn_output and ffn_down in each of the 2 layers; the vocabulary's rows.
  EXPECT_EQ(reduces, 4);
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(g->nodes.size() + 5, g2->nodes.size());
}

TEST(TensorParallel, RefusesASplitTheShapesDoNotDivide) {
  auto m = synth_model("tiny-qwen2", "Q8_0");
  ASSERT_TRUE(m.is_ok()) << m.message();
  runtime::SessionOptions o;
  o.n_threads = 2;
  o.gpu = false;
  o.tensor_parallel = 3;
  auto s = runtime::Session::create(**m, o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("query heads (4) to divide by 3"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace minfer::model
