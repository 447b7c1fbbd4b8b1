// Synthetic GGUF models: real shapes and metadata, seeded random weights.
//
// Contract: synthesize() writes an ordinary GGUF file (readable by llama.cpp
// and the gguf Python package) for a named shape (synth/presets.h) and a
// quantization (synth/quant_mix.h). Output is a pure function of the options:
// same options, same bytes, on any machine and any thread count (each row is
// drawn from its own seeded stream, see synth_rng.h). Weights are drawn at a
// realistic scale (1/sqrt(fan_in); residual projections further divided by
// sqrt(2 * n_layer)) so activations stay sane through the layers; norms are 1.
// Errors (unknown shape, unwritable path, missing tokenizer files) name the
// cause; a failed write leaves no partial file behind.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::synth {

struct SynthOptions {
  std::string shape;                             // preset name, e.g. "qwen2.5-0.5b"
  std::string quant = "Q8_0";                    // a plain type or a named mix (Q4_K_M)
  std::optional<quant::TensorType> embd_type;    // override token_embd's type
  std::optional<quant::TensorType> output_type;  // override output's type
  uint64_t seed = 1;
  int n_layer = 0;  // 0: the preset's layer count
  std::string output_path;
  int n_parts = 1;                  // > 1: write a split model name-0000i-of-0000n.gguf
  std::string qwen2_tokenizer_dir;  // vocab.json/merges.txt for Qwen shapes
  int n_threads = 0;                // 0: all hardware threads
};

// Called after each tensor with (index, count, tensor name).
using SynthProgress = std::function<void(size_t, size_t, const std::string&)>;

Status synthesize(const SynthOptions& options, const SynthProgress& progress = {});

// Where the real Qwen2 tokenizer is looked for when the option is empty:
// $MINFER_QWEN2_TOKENIZER, then ../shared/data/qwen2-tokenizer next to the source tree.
std::string default_qwen2_tokenizer_dir();

}  // namespace minfer::synth
