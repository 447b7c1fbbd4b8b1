// The mixture-of-experts hyper-parameters (model/hparams.cpp, docs/MOE.md):
// the expert keys of a synthetic Qwen3-MoE file, their defaults and
// fallbacks, and the keys the engine cannot honour, refused naming the key.
// Each case rewrites the file's metadata (model/hparams_testutil.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/hparams_testutil.h"

namespace minfer::model {
namespace {

using testing::EditableModel;

class MoeHparams : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_unique<EditableModel>("tiny-qwen3moe", "Q8_0");
    ASSERT_TRUE(model_->status().is_ok()) << model_->status().message();
  }
  static void TearDownTestSuite() { model_.reset(); }

  static Result<HParams> load_edited(const EditableModel::Edit& edit) { return model_->load(edit); }
  static void expect_refused(const EditableModel::Edit& edit, const std::string& key) {
    model_->expect_refused(edit, key);
  }

  static inline std::unique_ptr<EditableModel> model_;
};

TEST_F(MoeHparams, ReadsTheExpertKeys) {
  auto h = load_edited([](gguf::Writer&) {});
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_EQ(h->arch, Arch::kQwen3Moe);
  EXPECT_TRUE(h->is_moe());
  EXPECT_TRUE(h->qk_norm);
  EXPECT_EQ(h->n_expert, 8);
  EXPECT_EQ(h->n_expert_used, 2);
  EXPECT_EQ(h->n_ff_exp, 256);
  EXPECT_EQ(h->moe_gating, graph::MoeGating::kSoftmaxNormalized);
}

TEST_F(MoeHparams, WeightsNormKeyChoosesTheGating) {
  auto h = load_edited([](gguf::Writer& w) { w.set_bool("qwen3moe.expert_weights_norm", false); });
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_EQ(h->moe_gating, graph::MoeGating::kSoftmax);
}

// Without the expert width, llama.cpp takes feed_forward_length / used
// (512 / 2 = the file's 256); without either, the width key is missing.
TEST_F(MoeHparams, ExpertWidthFallsBackToTheDenseWidth) {
  auto h = load_edited([](gguf::Writer& w) { w.remove("qwen3moe.expert_feed_forward_length"); });
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_EQ(h->n_ff_exp, 256);
  expect_refused(
      [](gguf::Writer& w) {
        w.remove("qwen3moe.expert_feed_forward_length");
        w.remove("qwen3moe.feed_forward_length");
      },
      "qwen3moe.expert_feed_forward_length");
}

TEST_F(MoeHparams, RefusesWhatTheEngineCannotHonour) {
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen3moe.expert_shared_count", 1); },
                 "qwen3moe.expert_shared_count");
  expect_refused(
      [](gguf::Writer& w) { w.set_u32("qwen3moe.expert_shared_feed_forward_length", 512); },
      "qwen3moe.expert_shared_feed_forward_length");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen3moe.expert_group_count", 4); },
                 "qwen3moe.expert_group_count");
  expect_refused([](gguf::Writer& w) { w.set_f32("qwen3moe.expert_weights_scale", 2.5f); },
                 "qwen3moe.expert_weights_scale");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen3moe.expert_gating_func", 2); },
                 "qwen3moe.expert_gating_func");
  expect_refused([](gguf::Writer& w) { w.set_u32("qwen3moe.expert_used_count", 9); },
                 "qwen3moe.expert_used_count");
  expect_refused([](gguf::Writer& w) { w.remove("qwen3moe.expert_count"); },
                 "qwen3moe.expert_count");
  // Keys that say what the engine does anyway are accepted.
  auto h = load_edited([](gguf::Writer& w) {
    w.set_u32("qwen3moe.expert_shared_count", 0);
    w.set_u32("qwen3moe.expert_gating_func", 1);
    w.set_f32("qwen3moe.expert_weights_scale", 1.0f);
  });
  EXPECT_TRUE(h.is_ok()) << h.message();
}

TEST_F(MoeHparams, ExpertShapesAreChecked) {
  auto h = load_edited([](gguf::Writer& w) { w.set_u32("qwen3moe.expert_count", 16); });
  ASSERT_FALSE(h.is_ok());
  EXPECT_NE(h.message().find("blk.0.ffn_gate_inp.weight"), std::string::npos) << h.message();
}

}  // namespace
}  // namespace minfer::model
