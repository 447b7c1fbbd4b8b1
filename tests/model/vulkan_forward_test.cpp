// The engine on the Vulkan backend against the plain reference forward pass
// (reference_forward_testutil.h) on synthetic tiny models of every
// architecture: on lavapipe in CI (MINFER_VULKAN_DEVICE defaults to 0 here,
// since a CPU Vulkan device is only used when named), on a GPU's driver
// where there is one. CUDA is disabled so that the Vulkan backend is the
// session's GPU backend.
//
// The Vulkan kernels compute in f32 on f32 activations (no activation
// quantization), so for every weight type they should agree with the
// reference (which multiplies the same dequantized weights in double) to f32
// rounding; an f16 or q8_0 KV cache adds the rounding of stored keys and
// values. Each case runs a Session in three modes (one batch, one token at a
// time, a 20-token prompt then single tokens; the 160-token cases, which
// test the tiled prefill GEMM, one batch only) and compares every position:
//   rel  max_i |Δlogit_i| / (max ref - min ref), worst over positions;
//   top1 fraction of positions whose argmax agrees.
// Tolerances: f32 cache rel < 2e-4; f16 cache rel < 2e-3; q8_0 cache
// rel < 3e-2 (the CPU path's bound, reference_forward_test.cpp); top1 >= 0.98
// (a near-tie may flip), 0.9 with a q8_0 cache.
// tiny-qwen3moe's expert nodes run on Vulkan too (the shared GPU layer's
// MoE kernels, docs/GPU.md), at f32 accuracy with its F32 weights, and so do
// tiny-gpt-oss's (attention sinks, YaRN, swiglu_oai; docs/GPT_OSS.md).
// Skipped (with the reason) where no Vulkan device exists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "backend/vulkan/vulkan_options.h"
#include "graph/fusion.h"
#include "graph/plan.h"
#include "model/builder.h"
#include "model/forward_testutil.h"
#include "model/model.h"
#include "model/reference_forward_testutil.h"
#include "runtime/session.h"
#include "scoped_env.h"
#include "synth/synth.h"
#include "test_models.h"

#if MINFER_HAS_VULKAN
#include "backend/vulkan/vulkan_backend.h"
#include "vulkan_options.h"
#endif

namespace minfer::model::testing {
namespace {

namespace fs = std::filesystem;
using quant::TensorType;

#if MINFER_HAS_VULKAN

using ::minfer::testing::vulkan_options;

// The logits of every position: n_first tokens in one eval, then one at a time.
Result<std::vector<float>> run_session(const Model& model, TensorType k_type, TensorType v_type,
                                       bool gpu, const std::vector<int32_t>& tokens,
                                       size_t n_first) {
  runtime::SessionOptions o;
  o.n_ctx = std::max<int64_t>(128, static_cast<int64_t>(tokens.size()));
  o.n_threads = 2;
  o.k_type = k_type;
  o.v_type = v_type;
  o.max_batch = 512;
  o.gpu = gpu;
  o.options = vulkan_options();
  MINFER_ASSIGN_OR_RETURN(auto session, runtime::Session::create(model, o));
  if (session->gpu() != gpu) return Status::error("the session did not take the GPU");
  return eval_positions(*session, tokens, n_first);
}

struct VulkanCase {
  std::string shape, quant;
  TensorType k, v;
  int n_tokens;
  double rel;
};

class VulkanForward : public ::testing::TestWithParam<VulkanCase> {};

TEST_P(VulkanForward, MatchesReference) {
  // A 40-token split of the MoE models can take lavapipe past the 10 s
  // deadline on a busy 2-core machine; the deadline is not what this checks.
  minfer::testing::ScopedEnv patient("MINFER_GPU_TIMEOUT", "120");
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const VulkanCase& c = GetParam();
  auto model = synth_model(c.shape, c.quant);
  ASSERT_TRUE(model.is_ok()) << model.message();
  const int64_t n_vocab = (*model)->hparams().n_vocab;
  auto weights = load_reference_weights(**model);
  ASSERT_TRUE(weights.is_ok()) << weights.message();
  const auto tokens = make_tokens(c.n_tokens, n_vocab, 0x243f6a8885a308d3ull);
  const std::vector<float> ref = reference_forward(*weights, tokens);
  const bool q8 = c.k == TensorType::Q8_0 || c.v == TensorType::Q8_0;
  // The long cases test the tiled prefill GEMM: one batch only (lavapipe is slow).
  std::vector<size_t> modes = {tokens.size()};
  if (c.n_tokens <= 128) modes.insert(modes.end(), {size_t{1}, size_t{20}});
  for (size_t n_first : modes) {
    auto got = run_session(**model, c.k, c.v, true, tokens, n_first);
    ASSERT_TRUE(got.is_ok()) << "first " << n_first << ": " << got.message();
    const auto [rel, top1] = compare_logits(ref, *got, n_vocab);
    std::printf("  vulkan %-11s %-6s k %s v %s first %2zu: rel %.2e top1 %.3f\n", c.shape.c_str(),
                c.quant.c_str(), std::string(quant::type_name(c.k)).c_str(),
                std::string(quant::type_name(c.v)).c_str(), n_first, rel, top1);
    EXPECT_LE(rel, c.rel) << "first " << n_first;
    EXPECT_GE(top1, q8 ? 0.9 : 0.98) << "first " << n_first;
  }
}

constexpr auto kF32 = TensorType::F32;
constexpr auto kF16 = TensorType::F16;
constexpr auto kQ8 = TensorType::Q8_0;

INSTANTIATE_TEST_SUITE_P(
    Tiny, VulkanForward,
    ::testing::Values(VulkanCase{"tiny-qwen2", "F32", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-qwen3", "F32", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-llama", "F32", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-gemma3", "F32", kF32, kF32, 80, 2e-4},
                      VulkanCase{"tiny-qwen2", "Q4_0", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-qwen2", "Q8_0", kF16, kF16, 40, 2e-3},
                      VulkanCase{"tiny-qwen3", "Q4_K_M", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-llama", "Q5_0", kF16, kF16, 40, 2e-3},
                      VulkanCase{"tiny-llama", "Q6_K", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-gemma3", "Q4_K_M", kF32, kF32, 80, 2e-4},
                      VulkanCase{"tiny-qwen2", "F32", kQ8, kQ8, 40, 3e-2},
                      VulkanCase{"tiny-gemma3", "F32", kQ8, kF16, 80, 3e-2},
                      // Prompts of >= 64 tokens: the tiled GEMM.
                      VulkanCase{"tiny-qwen2", "Q4_0", kF32, kF32, 160, 2e-4},
                      VulkanCase{"tiny-gemma3", "Q4_K_M", kF32, kF32, 160, 2e-4},
                      // A mixture of experts (F32 experts: f32 dots).
                      VulkanCase{"tiny-qwen3moe", "F32", kF32, kF32, 40, 2e-4},
                      // gpt-oss: sinks, YaRN, swiglu_oai, biases; its window of
                      // 8 crossed. Q8_0 and MXFP4 (experts) weights: f32
                      // activations here, so the reference's bound holds (the
                      // CPU's quantized activations move routed tokens:
                      // reference_forward_test.cpp).
                      VulkanCase{"tiny-gpt-oss", "F32", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-gpt-oss", "Q8_0", kF32, kF32, 40, 2e-4},
                      VulkanCase{"tiny-gpt-oss", "MXFP4", kF32, kF32, 40, 2e-4}),
    [](const auto& info) {
      std::string s = info.param.shape + "_" + info.param.quant + "_" +
                      std::string(quant::type_name(info.param.k)) + "_" +
                      std::string(quant::type_name(info.param.v));
      if (info.param.n_tokens > 128) {
        s += "_" + std::to_string(info.param.n_tokens);
      }
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// gpt-oss with an f16 cache against the CPU backend with the same cache, not
// the f32 reference: the f16 rounding of keys and values moves router
// logits that the router's bias has brought close together, so a token of
// this prompt takes another expert on both backends alike (measured on
// lavapipe: both rel 2.3e-1 from the reference, 7.3e-4 from each other).
TEST(VulkanForward, GptOssWithAnF16CacheFollowsTheCpu) {
  minfer::testing::ScopedEnv patient("MINFER_GPU_TIMEOUT", "120");
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  auto model = synth_model("tiny-gpt-oss", "F32");
  ASSERT_TRUE(model.is_ok()) << model.message();
  const int64_t n_vocab = (*model)->hparams().n_vocab;
  const auto tokens = make_tokens(40, n_vocab, 0x243f6a8885a308d3ull);
  for (size_t n_first : {tokens.size(), size_t{1}}) {
    auto want = run_session(**model, kF16, kF16, false, tokens, n_first);
    auto got = run_session(**model, kF16, kF16, true, tokens, n_first);
    ASSERT_TRUE(want.is_ok()) << want.message();
    ASSERT_TRUE(got.is_ok()) << got.message();
    const auto [rel, top1] = compare_logits(*want, *got, n_vocab);
    std::printf(
        "  vulkan tiny-gpt-oss F32 k f16 v f16 first %2zu against the CPU: rel %.2e "
        "top1 %.3f\n",
        n_first, rel, top1);
    EXPECT_LE(rel, 2e-3) << "first " << n_first;
    EXPECT_GE(top1, 0.98) << "first " << n_first;
  }
}

// Where each node of the model's graph for `p` runs (its index in
// `backends`: Vulkan then the CPU), fused and planned as a Session does.
struct Placed {
  std::string node;  // "name (op)"
  std::string name;
  int backend = 0;
};
Result<std::vector<Placed>> placement(const Model& model,
                                      const std::vector<backend::Backend*>& backends,
                                      GraphParams p) {
  p.backends = 0b11;
  MINFER_ASSIGN_OR_RETURN(auto g, build_graph(model.hparams(), model.weights(), p));
  graph::fuse(g, backends, vulkan_options());
  MINFER_ASSIGN_OR_RETURN(auto plan, graph::build_plan(g, backends));
  std::vector<Placed> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const graph::Node& n = g.nodes[i];
    if (n.op == graph::Op::kInput) continue;
    out.push_back(
        {n.name + " (" + std::string(graph::op_name(n.op)) + ")", n.name, plan.node_backend[i]});
  }
  graph::release_plan(plan, backends);
  return out;
}

// Every node of the tiny models' graphs (one token, a prompt, a paged batch
// of the engine) runs on the Vulkan backend: nothing falls to the CPU.
TEST(VulkanForward, EveryNodeRunsOnVulkan) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  for (const char* shape : {"tiny-qwen2", "tiny-qwen3", "tiny-llama", "tiny-gemma3"}) {
    for (const char* quant : {"Q4_K_M", "Q8_0"}) {
      SCOPED_TRACE(std::string(shape) + " " + quant);
      auto model = synth_model(shape, quant);
      ASSERT_TRUE(model.is_ok()) << model.message();
      auto gpu = vulkan::create_backend((*model)->weights(), vulkan_options());
      ASSERT_TRUE(gpu.is_ok()) << gpu.message();
      cpu::CpuBackend cpu((*model)->weights(), 1);
      std::vector<backend::Backend*> backends = {gpu->get(), &cpu};
      for (int64_t n_tokens : {1, 7}) {
        for (int64_t page_size : {0, 16}) {
          GraphParams p;
          p.n_tokens = n_tokens;
          p.n_outputs = n_tokens;
          if (page_size > 0) {
            p.page_size = page_size;
            p.n_slots = 4;
            p.max_pages = 8;
          }
          auto placed = placement(**model, backends, p);
          ASSERT_TRUE(placed.is_ok()) << placed.message();
          for (const Placed& n : *placed) {
            EXPECT_EQ(n.backend, 0)
                << n.node << ", " << n_tokens << " tokens, page size " << page_size;
          }
        }
      }
    }
  }
}

// Places every node of `model`'s graph for decode and a prompt, unpaged and
// paged, with Vulkan first: each must land on Vulkan, and nodes whose
// placement text holds one of `markers` (op names as placement prints
// them) must number `want`.
void expect_every_node_on_vulkan(const model::Model& model, const std::vector<std::string>& markers,
                                 int want) {
  auto gpu = vulkan::create_backend(model.weights(), vulkan_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  cpu::CpuBackend cpu(model.weights(), 1);
  std::vector<backend::Backend*> backends = {gpu->get(), &cpu};
  for (int64_t n_tokens : {1, 7}) {
    for (int64_t page_size : {0, 16}) {
      GraphParams p;
      p.n_tokens = n_tokens;
      p.n_outputs = n_tokens;
      if (page_size > 0) {
        p.page_size = page_size;
        p.n_slots = 4;
        p.max_pages = 8;
      }
      auto placed = placement(model, backends, p);
      ASSERT_TRUE(placed.is_ok()) << placed.message();
      int seen = 0;
      for (const Placed& n : *placed) {
        seen += std::any_of(markers.begin(), markers.end(), [&](const std::string& m) {
          return n.node.find(m) != std::string::npos;
        });
        EXPECT_EQ(n.backend, 0) << n.node << ", " << n_tokens << " tokens, page " << page_size;
      }
      EXPECT_EQ(seen, want) << n_tokens << " tokens, page " << page_size;
    }
  }
}

// The mixture-of-experts ops have Vulkan kernels: the planner keeps every
// node of a MoE model, the routing and expert nodes included, on Vulkan
// (six a layer: top-k, weights, three expert matmuls, the sum).
TEST(VulkanForward, MoeNodesRunOnVulkan) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  auto model = synth_model("tiny-qwen3moe", "Q4_K_M");
  ASSERT_TRUE(model.is_ok()) << model.message();
  expect_every_node_on_vulkan(**model, {"(moe_", "(mul_mat_id)"}, 6 * (*model)->hparams().n_layer);
}

// gpt-oss's nodes (attention with sinks, YaRN RoPE and FusedQKV, swiglu_oai,
// the biased expert matmuls, MXFP4 experts) all run on Vulkan, decode,
// prompt and paged.
TEST(VulkanForward, GptOssNodesRunOnVulkan) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  for (const char* quant : {"F32", "Q8_0", "MXFP4"}) {
    SCOPED_TRACE(quant);
    auto model = synth_model("tiny-gpt-oss", quant);
    ASSERT_TRUE(model.is_ok()) << model.message();
    expect_every_node_on_vulkan(**model, {"(swiglu_oai)"}, (*model)->hparams().n_layer);
  }
}

// A weight larger than one binding can see (maxStorageBufferRange: 128 MiB
// on lavapipe and on many mobile GPUs): the real Gemma 3 270M's tied
// embedding (262144 x 640 Q8_0, 170 MiB). Its lookup and its output product
// bind it in ranges of rows (two dispatches each on lavapipe: the lookup's
// write the rows their range holds, the product's their columns of the
// logits), so every node stays on Vulkan, as where the device binds it
// whole; logits of more rows than one binding holds are the CPU's. The
// logits follow the CPU session's (whose parity with llama.cpp
// tests/model/parity_test.cpp holds): the CPU quantizes activations to 8
// bits in its products (Q8_K for Q4_K_M), the Vulkan kernels do not, so
// they agree within the CPU path's own bound against exact arithmetic (rel
// 8e-2, reference_forward_test.cpp), and an argmax that differs is a
// near-tie.
TEST(VulkanForward, WeightPastTheBindingRange) {
  // lavapipe takes seconds a step for this model on a busy 2-core machine.
  minfer::testing::ScopedEnv patient("MINFER_GPU_TIMEOUT", "600");
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  const std::string path = ::minfer::testing::gemma3_model_path();
  ASSERT_FALSE(path.empty()) << ::minfer::testing::kMissingGemma3;
  auto model = Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.message();
  auto info = vulkan::device_info(vulkan_options());
  ASSERT_TRUE(info.is_ok()) << info.message();
  const auto* embd = (*model)->weights().find("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  const uint64_t range = info->limits.max_storage_buffer_range;
  std::printf("  token_embd %zu bytes, maxStorageBufferRange %llu: %s\n", embd->nbytes,
              static_cast<unsigned long long>(range),
              range != 0 && embd->nbytes > range ? "past it" : "within it");

  auto gpu = vulkan::create_backend((*model)->weights(), vulkan_options());
  ASSERT_TRUE(gpu.is_ok()) << gpu.message();
  cpu::CpuBackend cpu((*model)->weights(), 1);
  std::vector<backend::Backend*> backends = {gpu->get(), &cpu};
  GraphParams p;
  p.n_tokens = p.n_outputs = 1;
  auto placed = placement(**model, backends, p);
  ASSERT_TRUE(placed.is_ok()) << placed.message();
  for (const Placed& n : *placed) EXPECT_EQ(n.backend, 0) << n.node;
  // The logits of 130 rows (130 MiB: perplexity scores hundreds) are more
  // than one binding holds there: that node is the CPU's, the rest Vulkan's.
  const int64_t n_vocab = (*model)->hparams().n_vocab;
  const bool logits_past = range != 0 && uint64_t(130 * n_vocab * 4) > range;
  p.n_tokens = p.n_outputs = 130;
  placed = placement(**model, backends, p);
  ASSERT_TRUE(placed.is_ok()) << placed.message();
  for (const Placed& n : *placed) {
    EXPECT_EQ(n.backend, logits_past && n.name == "logits" ? 1 : 0) << n.node << ", 130 outputs";
  }

  auto tokens = (*model)->tokenizer().encode("The capital of France is Paris",
                                             /*add_special=*/true, /*parse_special=*/false);
  ASSERT_TRUE(tokens.is_ok()) << tokens.message();
  auto want = run_session(**model, kF32, kF32, false, *tokens, 4);
  auto got = run_session(**model, kF32, kF32, true, *tokens, 4);
  ASSERT_TRUE(want.is_ok()) << want.message();
  ASSERT_TRUE(got.is_ok()) << got.message();
  const auto [rel, top1] = compare_logits(*want, *got, n_vocab);
  std::printf("  gemma3 270M Q4_K_M on Vulkan against the CPU: rel %.2e top1 %.3f\n", rel, top1);
  EXPECT_LE(rel, 8e-2);
  // Where the argmaxes differ, the CPU's two candidates are a near-tie: apart
  // by less than the rounding bound above.
  for (size_t r = 0; r < tokens->size(); ++r) {
    const float* c = want->data() + r * n_vocab;
    const float* v = got->data() + r * n_vocab;
    const auto a = std::max_element(c, c + n_vocab) - c;
    const auto b = std::max_element(v, v + n_vocab) - v;
    const double spread = c[a] - *std::min_element(c, c + n_vocab);
    if (a == b) continue;
    std::printf(
        "  position %zu: CPU %ld, Vulkan %ld, apart %.4f in the CPU's logits (range %.2f)\n", r,
        long(a), long(b), c[a] - c[b], spread);
    EXPECT_LE(c[a] - c[b], 8e-2 * spread) << "position " << r;
  }
}

// Two runs give the same logits bit for bit (the kernels' order of additions
// is fixed by the shapes), with and without split replay.
TEST(VulkanForward, GreedyIsDeterministic) {
  MINFER_SKIP_WITHOUT_VULKAN_BACKEND();
  auto model = synth_model("tiny-qwen2", "Q4_0");
  ASSERT_TRUE(model.is_ok()) << model.message();
  const auto tokens = make_tokens(12, (*model)->hparams().n_vocab, 7);
  auto a = run_session(**model, kF32, kF32, true, tokens, 4);
  auto b = run_session(**model, kF32, kF32, true, tokens, 4);
  ASSERT_TRUE(a.is_ok()) << a.message();
  ASSERT_TRUE(b.is_ok()) << b.message();
  EXPECT_EQ(*a, *b);
  // The single-token evals replay the decode split's recorded command list;
  // recording every split anew gives the same logits.
  minfer::testing::ScopedEnv no_replay("MINFER_NO_GPU_REPLAY", "1");
  auto c = run_session(**model, kF32, kF32, true, tokens, 4);
  ASSERT_TRUE(c.is_ok()) << c.message();
  EXPECT_EQ(*a, *c);
}

// The registry puts Vulkan below CUDA and above the CPU; a CPU Vulkan device
// (lavapipe) is not used unless MINFER_VULKAN_DEVICE names it.
TEST(VulkanForward, RegistryOrder) {
  std::vector<std::string_view> names;
  for (const auto& k : backend::backend_kinds()) names.push_back(k.name);
  const auto vk = std::find(names.begin(), names.end(), "Vulkan");
  ASSERT_NE(vk, names.end());
  EXPECT_LT(std::find(names.begin(), names.end(), "CUDA"), vk);
  EXPECT_EQ(names.back(), "CPU");
  Options o = vulkan_options();
  if (!vulkan::unavailable_reason(o).empty()) return;  // no device at all
  o.section<vulkan::VulkanOptions>().vulkan_device = -1;
  const std::string why = vulkan::unavailable_reason(o);
  if (!why.empty()) EXPECT_NE(why.find("runs on the CPU"), std::string::npos) << why;
}

#else

TEST(VulkanForward, NotBuilt) {
  GTEST_SKIP() << "built without MINFER_VULKAN";
}

#endif

}  // namespace
}  // namespace minfer::model::testing
