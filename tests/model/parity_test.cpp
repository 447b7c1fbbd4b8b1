// End-to-end parity with llama.cpp (docs/PARITY.md): perplexity of
// tests/data/text.txt at context 512 on synthetic Qwen2.5-0.5B (Q4_0, Q8_0),
// Qwen3-0.6B (Q8_0, Q4_K), a small Qwen3-MoE (Q8_0, Q4_K: 16 experts, 4
// used), a small gpt-oss (MXFP4, Q8_0) and the real Gemma 3 270M Q4_K_M must agree with
// llama.cpp's within |Δ ln PPL| <= 0.003; greedy Gemma 3 continuations must
// match llama.cpp's token for token. The reference numbers in golden/ were
// made by tools/ref/make_parity_goldens.py (llama-cpp-python); the synthetic
// models are rebuilt here by the deterministic `synth` (their bytes are pinned
// by Synth.BytesMatchRecordedDigests).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/json.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/perplexity.h"
#include "synth/synth.h"
#include "test_models.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using nlohmann::json;

json load_golden(const std::string& name) {
  auto v = parse_json(read_file(std::string(MINFER_TEST_DATA_DIR) + "/golden/" + name));
  EXPECT_TRUE(v.is_ok()) << name << ": " << v.message();
  return v.is_ok() ? std::move(v).value() : json();
}

// The model file for a golden entry: synthesized into `dir`, or the real Gemma.
std::string model_file(const std::string& name, const json& entry, const fs::path& dir) {
  const json* shape = json_find(entry, "shape");
  if (shape == nullptr || shape->is_null()) return testing::gemma3_model_path();
  synth::SynthOptions o;
  o.shape = shape->get<std::string>();
  o.quant = entry.at("quant").get<std::string>();
  o.output_path = (dir / (name + ".gguf")).string();
  Status s = synth::synthesize(o);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return o.output_path;
}

void check_perplexity(const std::string& name) {
  const json golden = load_golden("parity.json");
  const json* models = json_find(golden, "models");
  const json* entry = models != nullptr ? json_find(*models, name) : nullptr;
  ASSERT_NE(entry, nullptr) << name << " missing from golden/parity.json";
  const fs::path dir = fs::temp_directory_path() / ("minfer_parity_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = model_file(name, *entry, dir);
  ASSERT_FALSE(path.empty()) << testing::kMissingGemma3;
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const std::string text = read_file(std::string(MINFER_SOURCE_DIR) + "/tests/data/text.txt");
  auto tokens = (*model)->tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_TRUE(tokens.is_ok()) << tokens.message();
  EXPECT_EQ(static_cast<int64_t>(tokens->size()), entry->at("n_tokens").get<int64_t>())
      << "tokenization differs from llama.cpp's";
  runtime::EngineOptions eo;
  eo.n_slots = 1;
  eo.n_ctx = 512;
  eo.k_type = eo.v_type = quant::TensorType::F16;
  eo.gpu = false;                      // llama.cpp's CPU numerics
  eo.options.batch_invariant = false;  // as `minfer perplexity` runs it
  auto engine = runtime::Engine::create(**model, eo);
  ASSERT_TRUE(engine.is_ok()) << engine.message();
  runtime::PerplexityOptions po;
  po.n_ctx = 512;
  auto r = runtime::perplexity(**engine, *tokens, po);
  ASSERT_TRUE(r.is_ok()) << r.message();
  const double want = entry->at("ln_ppl").get<double>();
  std::printf(
      "%s: ln PPL %.5f (PPL %.4f), llama.cpp %.5f (PPL %.4f), delta %+.5f over %lld chunks\n",
      name.c_str(), r->mean_nll, r->ppl, want, std::exp(want), r->mean_nll - want,
      static_cast<long long>(r->chunks));
  EXPECT_EQ(r->chunks, entry->at("chunks").get<int64_t>());
  EXPECT_LE(std::fabs(r->mean_nll - want), 0.003) << name;
  fs::remove_all(dir);
}

TEST(Parity, Qwen25_05B_Q4_0) {
  check_perplexity("qwen2.5-0.5b-Q4_0");
}
TEST(Parity, Qwen25_05B_Q8_0) {
  check_perplexity("qwen2.5-0.5b-Q8_0");
}
TEST(Parity, Qwen3_06B_Q8_0) {
  check_perplexity("qwen3-0.6b-Q8_0");
}
TEST(Parity, Qwen3_06B_Q4_K) {
  check_perplexity("qwen3-0.6b-Q4_K");
}
TEST(Parity, Qwen3Moe_Small_Q8_0) {
  check_perplexity("qwen3moe-small-Q8_0");
}
TEST(Parity, Qwen3Moe_Small_Q4_K) {
  check_perplexity("qwen3moe-small-Q4_K");
}
// gpt-oss small: 4 layers alternating a window of 128 with full attention,
// sinks, YaRN, biased router and experts, swiglu_oai; context 512 crosses
// the window. MXFP4 experts (Q8_0 elsewhere, as the published files) and Q8_0.
TEST(Parity, GptOss_Small_MXFP4) {
  check_perplexity("gpt-oss-small-MXFP4");
}

TEST(Parity, GptOss_Small_Q8_0) {
  check_perplexity("gpt-oss-small-Q8_0");
}

TEST(Parity, Gemma3_270M_Q4_K_M) {
  check_perplexity("gemma3-270m-Q4_K_M");
}

// Greedy decoding follows llama.cpp's choices token for token until llama.cpp
// itself faces a near tie. Exact equality over 32 tokens cannot be promised:
// with 8-bit activations a last-bit difference in any kernel moves Gemma 3's
// logits by ~0.2 RMS (our own scalar and AVX2 kernels differ that much;
// docs/ARCHITECTURE.md), and llama.cpp's best and second-best logits come
// within 0.05 of each other within 32 steps on most prompts (the golden
// records its margin at every step). So the test fails if we choose
// differently at any step before llama.cpp's margin has once dropped below
// kNearTie, and prints how far each continuation matches. And, as the
// acceptance criterion asks, at least kMinExact of the golden's prompts must
// give llama.cpp's 32 tokens exactly (docs/PARITY.md lists all of them).
constexpr double kNearTie = 0.5;
constexpr int kMinExact = 3;

TEST(Parity, Gemma3GreedyMatchesLlamaCpp) {
  const std::string path = testing::gemma3_model_path();
  ASSERT_FALSE(path.empty()) << testing::kMissingGemma3;
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const json golden = load_golden("gemma3_greedy.json");
  ASSERT_NE(json_find(golden, "cases"), nullptr);
  int exact = 0, cases = 0;
  for (const json& c : golden.at("cases")) {
    const std::string prompt = c.at("prompt").get<std::string>();
    auto ids = (*model)->tokenizer().encode(prompt, true, true);
    ASSERT_TRUE(ids.is_ok()) << ids.message();
    std::vector<int32_t> want_prompt, want;
    std::vector<double> margins;
    for (const json& v : c.at("prompt_ids")) want_prompt.push_back(v.get<int32_t>());
    for (const json& v : c.at("ids")) want.push_back(v.get<int32_t>());
    for (const json& v : c.at("margins")) margins.push_back(v.get<double>());
    ASSERT_EQ(margins.size(), want.size());
    if (want.empty()) continue;
    EXPECT_EQ(*ids, want_prompt) << prompt;
    runtime::SessionOptions so;
    so.n_ctx = 512;
    so.k_type = so.v_type = quant::TensorType::F16;
    so.gpu = false;  // llama.cpp's CPU numerics
    auto session = runtime::Session::create(**model, so);
    ASSERT_TRUE(session.is_ok()) << session.message();
    runtime::SamplerParams sp;
    sp.temperature = 0.0f;
    auto sampler = runtime::Sampler::create(sp);
    ASSERT_TRUE(sampler.is_ok()) << sampler.message();
    std::vector<int32_t> got;
    auto st = runtime::generate(**session, *sampler, *ids, static_cast<int64_t>(want.size()),
                                [&](int32_t t) {
                                  got.push_back(t);
                                  return true;
                                });
    ASSERT_TRUE(st.is_ok()) << st.message();
    size_t same = 0;
    while (same < got.size() && same < want.size() && got[same] == want[same]) ++same;
    double min_margin = 1e9;  // llama.cpp's smallest margin up to the first difference
    for (size_t i = 0; i <= same && i < margins.size(); ++i)
      min_margin = std::min(min_margin, margins[i]);
    std::printf("greedy '%s': %zu/%zu tokens as llama.cpp; its smallest margin up to there %.3f\n",
                prompt.c_str(), same, want.size(), min_margin);
    ++cases;
    if (same == want.size() && want.size() == 32) ++exact;
    if (same < want.size()) {
      EXPECT_LT(min_margin, kNearTie)
          << "greedy continuation of '" << prompt << "' leaves llama.cpp's at token " << same
          << " although llama.cpp's margins were all >= " << kNearTie << " up to there";
    }
  }
  std::printf("greedy: %d of %d prompts give llama.cpp's 32 tokens exactly\n", exact, cases);
  EXPECT_GE(exact, kMinExact);
}

}  // namespace
}  // namespace minfer
