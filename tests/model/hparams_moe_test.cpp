// The mixture-of-experts hyper-parameters (model/hparams.cpp, docs/MOE.md):
// the expert keys of a synthetic Qwen3-MoE file, their defaults and
// fallbacks, and the keys the engine cannot honour, refused naming the key.
// Each case rewrites the file's metadata (tensors copied as they are).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "model/hparams.h"
#include "model/synth.h"

namespace minfer::model {
namespace {

namespace fs = std::filesystem;

class MoeHparams : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("minfer_hparams_moe_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    SynthOptions o;
    o.shape = "tiny-qwen3moe";
    o.quant = "Q8_0";
    o.seed = 3;
    o.n_threads = 2;
    o.output_path = (dir_ / "base.gguf").string();
    const Status s = synthesize(o);
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // The base file with `edit` applied to its metadata, then load_hparams.
  static Result<HParams> load_edited(const std::function<void(gguf::Writer&)>& edit) {
    MINFER_ASSIGN_OR_RETURN(auto base, gguf::File::open((dir_ / "base.gguf").string()));
    gguf::Writer w;
    for (const auto& [key, value] : base->metadata()) w.set(key, value);
    for (const gguf::TensorInfo& t : base->tensors()) {
      MINFER_RETURN_IF_ERROR(
          w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes)));
    }
    edit(w);
    const std::string path = (dir_ / "edited.gguf").string();
    MINFER_RETURN_IF_ERROR(w.write(path));
    MINFER_ASSIGN_OR_RETURN(auto file, gguf::File::open(path));
    return load_hparams(*file);
  }

  static void expect_refused(const std::function<void(gguf::Writer&)>& edit,
                             const std::string& key) {
    auto h = load_edited(edit);
    ASSERT_FALSE(h.is_ok()) << key;
    EXPECT_NE(h.message().find("'" + key + "'"), std::string::npos) << h.message();
  }

  static inline fs::path dir_;
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
