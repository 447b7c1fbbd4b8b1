#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "base/options.h"
#include "gguf/writer.h"
#include "quant/reference.h"
#include "synth/presets.h"
#include "synth/quant_mix.h"
#include "synth/synth_rng.h"
#include "synth/synth_vocab.h"

namespace minfer::synth {
namespace {

using quant::TensorType;

enum class Init { kGaussian, kOnes, kLlama3RopeFactors };

struct PlannedTensor {
  std::string name;
  std::vector<int64_t> dims;  // dims[0] = row length
  TensorType type;
  Init init = Init::kGaussian;
  float stddev = 0.0f;
};

class Planner {
 public:
  Planner(const ModelShape& s, const QuantMix& mix) : s_(s), mix_(mix) {}

  void matrix(std::string name, int64_t in, int64_t out, TensorRole role, int layer, float sd) {
    TensorType t = choose_type(mix_, role, layer, s_.n_layer, in, s_.tied_output);
    tensors.push_back({std::move(name), {in, out}, t, Init::kGaussian, sd});
  }
  // n_expert matrices [in, out] in one 3-D tensor, typed as a 2-D one of the role.
  void experts(std::string name, int64_t in, int64_t out, int64_t n_expert, TensorRole role,
               int layer, float sd) {
    TensorType t = choose_type(mix_, role, layer, s_.n_layer, in, s_.tied_output);
    tensors.push_back({std::move(name), {in, out, n_expert}, t, Init::kGaussian, sd});
  }
  // A matrix kept in F32 whatever the mix (llama.cpp's converter and
  // quantizer never quantize the MoE router).
  void f32_matrix(std::string name, int64_t in, int64_t out, float sd) {
    tensors.push_back({std::move(name), {in, out}, TensorType::F32, Init::kGaussian, sd});
  }
  void vector(std::string name, int64_t n, Init init, float sd = 0.0f) {
    tensors.push_back({std::move(name), {n}, TensorType::F32, init, sd});
  }

  std::vector<PlannedTensor> tensors;

 private:
  const ModelShape& s_;
  const QuantMix& mix_;
};

// A MoE layer's router and experts (prefix b = "blk.N."). The router's
// logits come out at about unit scale, so each token's choice is clear but
// not one-sided; the weighted sum of experts has one expert's scale.
void plan_experts(Planner& p, const ModelShape& s, const std::string& b, int layer, float in_sd,
                  float residual_scale) {
  const int64_t d = s.n_embd, ff = s.n_ff_exp, n = s.n_expert;
  p.f32_matrix(b + "ffn_gate_inp.weight", d, n, in_sd);
  p.experts(b + "ffn_gate_exps.weight", d, ff, n, TensorRole::kFfnGateUp, layer, in_sd);
  p.experts(b + "ffn_up_exps.weight", d, ff, n, TensorRole::kFfnGateUp, layer, in_sd);
  const float down_sd = residual_scale / std::sqrt(static_cast<float>(ff));
  p.experts(b + "ffn_down_exps.weight", ff, d, n, TensorRole::kFfnDown, layer, down_sd);
  if (!s.moe_biases) return;
  // gpt-oss: the router's bias moves choices about as much as its logits'
  // spread; the experts' biases are small, as trained ones are.
  p.vector(b + "ffn_gate_inp.bias", n, Init::kGaussian, 0.5f);
  p.f32_matrix(b + "ffn_gate_exps.bias", ff, n, 0.05f);
  p.f32_matrix(b + "ffn_up_exps.bias", ff, n, 0.05f);
  p.f32_matrix(b + "ffn_down_exps.bias", d, n, 0.02f);
}

std::vector<PlannedTensor> plan(const ModelShape& s, const QuantMix& mix) {
  Planner p(s, mix);
  const int64_t d = s.n_embd, q_dim = int64_t{s.n_head} * s.head_dim,
                kv_dim = int64_t{s.n_head_kv} * s.head_dim, ff = s.n_ff;
  const float in_sd = 1.0f / std::sqrt(static_cast<float>(d));
  const float residual_scale = 1.0f / std::sqrt(2.0f * static_cast<float>(s.n_layer));
  p.matrix("token_embd.weight", d, s.n_vocab, TensorRole::kEmbedding, 0, 0.05f);
  if (s.llama3_rope_freqs) p.vector("rope_freqs.weight", s.head_dim / 2, Init::kLlama3RopeFactors);
  for (int i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    p.vector(b + "attn_norm.weight", d, Init::kOnes);
    p.matrix(b + "attn_q.weight", d, q_dim, TensorRole::kOtherMatrix, i, in_sd);
    p.matrix(b + "attn_k.weight", d, kv_dim, TensorRole::kOtherMatrix, i, in_sd);
    p.matrix(b + "attn_v.weight", d, kv_dim, TensorRole::kAttnV, i, in_sd);
    if (s.qkv_bias) {
      p.vector(b + "attn_q.bias", q_dim, Init::kGaussian, 0.02f);
      p.vector(b + "attn_k.bias", kv_dim, Init::kGaussian, 0.02f);
      p.vector(b + "attn_v.bias", kv_dim, Init::kGaussian, 0.02f);
    }
    if (s.qk_norm) {
      p.vector(b + "attn_q_norm.weight", s.head_dim, Init::kOnes);
      p.vector(b + "attn_k_norm.weight", s.head_dim, Init::kOnes);
    }
    const float out_sd = residual_scale / std::sqrt(static_cast<float>(q_dim));
    p.matrix(b + "attn_output.weight", q_dim, d, TensorRole::kOtherMatrix, i, out_sd);
    if (s.attn_output_bias) p.vector(b + "attn_output.bias", d, Init::kGaussian, 0.02f);
    // Sinks spread widely enough that some heads' sink outweighs every key.
    if (s.attn_sinks) p.vector(b + "attn_sinks.weight", s.n_head, Init::kGaussian, 2.0f);
    if (s.gemma_norms) p.vector(b + "post_attention_norm.weight", d, Init::kOnes);
    p.vector(b + s.ffn_norm + ".weight", d, Init::kOnes);
    if (s.n_expert > 0) {
      plan_experts(p, s, b, i, in_sd, residual_scale);
    } else {
      p.matrix(b + "ffn_gate.weight", d, ff, TensorRole::kFfnGateUp, i, in_sd);
      p.matrix(b + "ffn_up.weight", d, ff, TensorRole::kFfnGateUp, i, in_sd);
      const float down_sd = residual_scale / std::sqrt(static_cast<float>(ff));
      p.matrix(b + "ffn_down.weight", ff, d, TensorRole::kFfnDown, i, down_sd);
    }
    if (s.gemma_norms) p.vector(b + "post_ffw_norm.weight", d, Init::kOnes);
  }
  p.vector("output_norm.weight", d, Init::kOnes);
  if (!s.tied_output) p.matrix("output.weight", d, s.n_vocab, TensorRole::kOutput, 0, in_sd);
  return std::move(p.tensors);
}

// Llama 3.x long-context RoPE: per-frequency divisors for rope_freqs.weight
// (factor 32, low/high frequency factors 1 and 4, original context 8192, as in
// Llama 3.2's config.json).
std::vector<float> llama3_rope_factors(const ModelShape& s) {
  constexpr double kFactor = 32.0, kLow = 1.0, kHigh = 4.0, kOldCtx = 8192.0;
  constexpr double kPi = 3.14159265358979323846;
  const double low_wavelen = kOldCtx / kLow, high_wavelen = kOldCtx / kHigh;
  std::vector<float> out;
  for (int i = 0; i < s.head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(s.rope_freq_base),
                                       2.0 * i / static_cast<double>(s.head_dim));
    const double wavelen = 2.0 * kPi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = kFactor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (kOldCtx / wavelen - kLow) / (kHigh - kLow);
      f = 1.0 / ((1.0 - smooth) / kFactor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

// Generates and quantizes rows [begin, end) of `t` into `out`.
Status fill_rows(const PlannedTensor& t, uint64_t seed, const std::vector<float>& rope_factors,
                 int64_t begin, int64_t end, uint64_t row_bytes, std::span<uint8_t> out) {
  const int64_t n = t.dims[0];
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = begin; r < end; ++r) {
    switch (t.init) {
      case Init::kOnes:
        std::fill(row.begin(), row.end(), 1.0f);
        break;
      case Init::kLlama3RopeFactors:
        row = rope_factors;
        break;
      case Init::kGaussian: {
        SynthRng rng = SynthRng::for_stream(seed, t.name, static_cast<uint64_t>(r));
        for (float& x : row) x = rng.gaussian() * t.stddev;
        break;
      }
    }
    uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
    MINFER_RETURN_IF_ERROR(quant::quantize_row(t.type, row.data(), dst, n));
  }
  return Status::ok();
}

Status fill_tensor(const PlannedTensor& t, uint64_t seed, int n_threads,
                   const std::vector<float>& rope_factors, std::span<uint8_t> out) {
  MINFER_ASSIGN_OR_RETURN(uint64_t row_bytes, quant::row_bytes(t.type, t.dims[0]));
  int64_t n_rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) n_rows *= t.dims[i];
  if (out.size() != row_bytes * static_cast<uint64_t>(n_rows)) {
    return Status::invalid_argument("tensor '" + t.name + "': writer gave " +
                                    std::to_string(out.size()) + " bytes, expected " +
                                    std::to_string(row_bytes * n_rows));
  }
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(n_threads, n_rows / 16));
  std::vector<Status> results(static_cast<size_t>(workers));
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t begin = n_rows * w / workers, end = n_rows * (w + 1) / workers;
    auto work = [&, w, begin, end] {
      results[static_cast<size_t>(w)] =
          fill_rows(t, seed, rope_factors, begin, end, row_bytes, out);
    };
    // Rows are filled by their index alone, so a range the system gives no
    // thread for is filled here instead, with the same bytes.
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      work();
    }
  }
  for (auto& th : threads) th.join();
  for (auto& r : results) MINFER_RETURN_IF_ERROR(r.with_context("tensor '" + t.name + "'"));
  return Status::ok();
}

void write_hparams(gguf::Writer& w, const ModelShape& s, const QuantMix& mix) {
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", s.display_name);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", mix.file_type);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32(a + "rope.freq_base", s.rope_freq_base);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (s.explicit_head_dim) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  if (s.arch == "llama") {
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  }
  if (s.sliding_window > 0) {
    w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
  }
  if (s.n_expert > 0) {  // the keys llama.cpp's converter writes for Qwen3-MoE and gpt-oss
    w.set_u32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
  }
  if (s.yarn_factor > 0.0f) {
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.yarn_factor);
    w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.yarn_orig_ctx));
  }
}

Result<tokenizer::Vocab> make_vocab(const ModelShape& s, const SynthOptions& o) {
  switch (s.vocab) {
    case VocabKind::kQwen2: {
      const std::string dir =
          o.qwen2_tokenizer_dir.empty() ? default_qwen2_tokenizer_dir() : o.qwen2_tokenizer_dir;
      return load_qwen2_vocab(dir, s.n_vocab);
    }
    case VocabKind::kSyntheticSpm:
      return make_synthetic_spm(s.n_vocab, o.seed);
    case VocabKind::kSyntheticBpe:
      return make_synthetic_bpe(s.n_vocab,
                                !s.bpe_pre.empty()  ? s.bpe_pre
                                : s.arch == "llama" ? "llama-bpe"
                                                    : "qwen2",
                                o.seed);
  }
  return Status::invalid_argument("unknown vocabulary kind");
}

}  // namespace

std::string default_qwen2_tokenizer_dir() {
  if (const std::string& dir = process_options().qwen2_tokenizer_dir; !dir.empty()) return dir;
  return std::string(MINFER_SOURCE_DIR) + "/../shared/data/qwen2-tokenizer";
}

Status synthesize(const SynthOptions& o, const SynthProgress& progress) {
  MINFER_ASSIGN_OR_RETURN(ModelShape shape, find_preset(o.shape));
  if (o.n_layer < 0)
    return Status::invalid_argument("layer count " + std::to_string(o.n_layer) + " < 0");
  if (o.n_layer > 0) shape.n_layer = o.n_layer;
  MINFER_ASSIGN_OR_RETURN(QuantMix mix, parse_quant_mix(o.quant));
  mix.embd = o.embd_type;
  mix.output = o.output_type;
  if (o.output_path.empty()) return Status::invalid_argument("no output path given");
  if (o.n_parts < 1)
    return Status::invalid_argument("part count " + std::to_string(o.n_parts) + " < 1");

  MINFER_ASSIGN_OR_RETURN(tokenizer::Vocab vocab, make_vocab(shape, o));
  gguf::Writer writer;
  write_hparams(writer, shape, mix);
  write_vocab(writer, vocab, "");

  const int n_threads = o.n_threads > 0
                            ? o.n_threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::vector<float> rope_factors = llama3_rope_factors(shape);
  auto tensors = std::make_shared<std::vector<PlannedTensor>>(plan(shape, mix));
  for (size_t i = 0; i < tensors->size(); ++i) {
    const PlannedTensor& t = (*tensors)[i];
    auto fill = [tensors, i, seed = o.seed, n_threads, rope_factors,
                 progress](std::span<uint8_t> out) -> Status {
      const PlannedTensor& pt = (*tensors)[i];
      MINFER_RETURN_IF_ERROR(fill_tensor(pt, seed, n_threads, rope_factors, out));
      if (progress) progress(i + 1, tensors->size(), pt.name);
      return Status::ok();
    };
    MINFER_RETURN_IF_ERROR(writer.add_tensor(t.name, t.type, t.dims, fill));
  }
  if (o.n_parts > 1) return writer.write_split(o.output_path, o.n_parts);
  return writer.write(o.output_path);
}

}  // namespace minfer::synth
