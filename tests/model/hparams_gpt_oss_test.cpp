// gpt-oss hyper-parameters (model/hparams.cpp, docs/GPT_OSS.md): the keys of
// a synthetic tiny-gpt-oss file, the layers its window applies to, the YaRN
// constants the builder derives, and the keys and tensors refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "graph/yarn.h"
#include "model/hparams_testutil.h"

namespace minfer::model {
namespace {

using testing::EditableModel;

class GptOssHparams : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::make_unique<EditableModel>("tiny-gpt-oss", "Q8_0");
    ASSERT_TRUE(model_->status().is_ok()) << model_->status().message();
  }
  static void TearDownTestSuite() { model_.reset(); }

  static inline std::unique_ptr<EditableModel> model_;
};

TEST_F(GptOssHparams, ReadsTheKeys) {
  auto h = model_->load([](gguf::Writer&) {});
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_EQ(h->arch, Arch::kGptOss);
  EXPECT_EQ(h->n_expert, 8);
  EXPECT_EQ(h->n_expert_used, 2);
  EXPECT_EQ(h->n_ff_exp, 256);
  EXPECT_EQ(h->moe_gating, graph::MoeGating::kTopKSoftmax);
  EXPECT_TRUE(h->qkv_bias && h->attn_output_bias && h->attn_sinks && h->moe_biases);
  EXPECT_TRUE(h->swiglu_oai);
  EXPECT_EQ(h->ffn_norm_name, "post_attention_norm");
  EXPECT_FALSE(h->tied_output);
  EXPECT_EQ(h->head_dim, 64);
  EXPECT_FLOAT_EQ(h->rms_eps, 1e-5f);
  // Window 8 on the even layers, full attention on the odd ones, the same
  // RoPE base and scale on both.
  EXPECT_EQ(h->sliding_window, 8);
  EXPECT_TRUE(h->is_swa_layer(0));
  EXPECT_FALSE(h->is_swa_layer(1));
  EXPECT_EQ(h->layer_rope_base(0), 150000.0f);
  EXPECT_EQ(h->layer_rope_base(1), 150000.0f);
  EXPECT_EQ(h->layer_rope_scale(0), 1.0f / 32.0f);
  EXPECT_EQ(h->layer_rope_scale(1), 1.0f / 32.0f);
  EXPECT_EQ(h->rope_scaling, RopeScaling::kYarn);
  EXPECT_EQ(h->n_ctx_orig_yarn, 256);
  EXPECT_EQ(h->yarn_beta_fast, 32.0f);
  EXPECT_EQ(h->yarn_beta_slow, 1.0f);
}

// The published files' values: n_rot 64, original context 4096, base
// 150000, factor 32 give correction dimensions 8 and 18 (floor 8.09, ceil
// 17.40) and a magnitude of 1 + 0.1 ln 32.
TEST_F(GptOssHparams, YarnConstantsOfThePublishedFiles) {
  graph::RopeMeta m;
  graph::apply_yarn({64, 4096, 150000.0f, 1.0f / 32.0f, 32.0f, 1.0f, 1.0f, 1.0f}, m);
  EXPECT_EQ(m.ext_factor, 1.0f);
  EXPECT_EQ(m.corr_low, 8.0f);
  EXPECT_EQ(m.corr_high, 18.0f);
  EXPECT_NEAR(m.mscale, 1.0 + 0.1 * std::log(32.0), 1e-6);
  graph::RopeMeta plain;
  graph::apply_yarn({64, 4096, 150000.0f, 1.0f, 32.0f, 1.0f, 0.0f, 1.0f}, plain);
  EXPECT_EQ(plain.ext_factor, 0.0f);
  EXPECT_EQ(plain.mscale, 1.0f);
}

TEST_F(GptOssHparams, OptionalKeysAreHonoured) {
  auto h = model_->load([](gguf::Writer& w) {
    w.set_u32("gpt-oss.attention.sliding_window_pattern", 3);
    w.set_f32("gpt-oss.rope.freq_base_swa", 10000.0f);
    w.set_f32("gpt-oss.rope.scaling.yarn_beta_fast", 16.0f);
    w.set_f32("gpt-oss.rope.scaling.yarn_beta_slow", 2.0f);
  });
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_EQ(h->swa_pattern, 3);
  EXPECT_EQ(h->layer_rope_base(0), 10000.0f);
  EXPECT_EQ(h->layer_rope_base(2), 150000.0f);
  EXPECT_EQ(h->yarn_beta_fast, 16.0f);
  EXPECT_EQ(h->yarn_beta_slow, 2.0f);
}

TEST_F(GptOssHparams, RefusesKeysItCannotHonour) {
  model_->expect_refused([](gguf::Writer& w) { w.remove("gpt-oss.attention.sliding_window"); },
                         "gpt-oss.attention.sliding_window");
  model_->expect_refused([](gguf::Writer& w) { w.set_u32("gpt-oss.expert_gating_func", 1); },
                         "gpt-oss.expert_gating_func");
  model_->expect_refused([](gguf::Writer& w) { w.set_bool("gpt-oss.expert_weights_norm", true); },
                         "gpt-oss.expert_weights_norm");
  model_->expect_refused(
      [](gguf::Writer& w) { w.set_f32("gpt-oss.rope.scaling.yarn_ext_factor", 0.5f); },
      "gpt-oss.rope.scaling.yarn_ext_factor");
  model_->expect_refused(
      [](gguf::Writer& w) { w.set_string("gpt-oss.rope.scaling.type", "longrope"); },
      "gpt-oss.rope.scaling.type");
  // What gpt-oss's architecture implies anyway is accepted.
  auto h = model_->load([](gguf::Writer& w) {
    w.set_u32("gpt-oss.expert_gating_func", 3);
    w.set_bool("gpt-oss.expert_weights_norm", false);
  });
  EXPECT_TRUE(h.is_ok()) << h.message();
}

TEST_F(GptOssHparams, TensorsAreCheckedByName) {
  auto none = [](gguf::Writer&) {};
  for (const char* t :
       {"blk.1.attn_sinks.weight", "blk.0.attn_output.bias", "blk.1.ffn_gate_inp.bias",
        "blk.0.ffn_down_exps.bias", "blk.1.post_attention_norm.weight", "output.weight"}) {
    model_->expect_refused(none, t, {t});
  }
  // Sinks of the wrong length are named with their shape.
  auto h = model_->load([](gguf::Writer& w) { w.set_u32("gpt-oss.attention.head_count", 2); });
  ASSERT_FALSE(h.is_ok());
  EXPECT_NE(h.message().find("blk.0.attn_q.weight"), std::string::npos) << h.message();
}

}  // namespace
}  // namespace minfer::model
