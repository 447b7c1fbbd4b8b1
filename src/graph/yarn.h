// YaRN RoPE scaling: the per-model constants every backend's rope kernel
// needs, computed once here so that the kernels only blend and scale.
//
// Contract: yarn_params() fills RopeMeta's ext_factor, corr_low, corr_high
// and mscale from the model's rotated dimensions, its original training
// context, RoPE base and frequency scale, and the two beta bounds, with the
// float operations ggml performs (so a kernel's cos and sin match
// llama.cpp's bits where its own math does). ext_factor 0 leaves the meta
// as plain RoPE. The formulas are in docs/GPT_OSS.md, "YaRN RoPE".
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace minfer::graph {

struct YarnConfig {
  int64_t n_rot = 0;       // rotated dimensions per head
  int64_t n_ctx_orig = 0;  // the context the model was trained at before scaling
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / scaling factor
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float ext_factor = 1.0f;   // 1: YaRN as trained; 0: plain RoPE
  float attn_factor = 1.0f;  // GGUF rope.scaling.attn_factor (1 when absent)
};

// Sets rope.ext_factor, corr_low, corr_high and mscale from `c`.
void apply_yarn(const YarnConfig& c, RopeMeta& rope);

}  // namespace minfer::graph
