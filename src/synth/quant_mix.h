// Which tensor type each weight of a model gets when it is quantized: a plain
// type for every matmul weight, or one of llama.cpp's named mixes (Q4_K_M, ...).
//
// Contract: pure functions of (mix, tensor role, layer, shape). 1-D tensors
// (norms, biases, rope factors) are always F32. A K-quant chosen for a matrix
// whose row length is not a multiple of 256 falls back to the 32-block type
// llama.cpp uses in that case (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K
// -> Q4_0... see quant_mix.cpp), so every file we write is loadable by it.
// The "MXFP4" mix puts the FFN matrices (gate, up, down) in MXFP4 and every
// other matrix in Q8_0: for a dense model, what llama-quantize's MXFP4_MOE
// does for the expert tensors of a MoE model (whose other matrices, output
// included, it writes as Q8_0); general.file_type is MXFP4_MOE's 38.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "quant/tensor_type.h"

namespace minfer::synth {

struct QuantMix {
  std::string name;        // "Q4_0", "Q4_K_M", ...
  quant::TensorType base;  // the type of most matmul weights
  bool k_mix = false;      // apply the _M rules (attn_v / ffn_down get Q6_K in some layers)
  std::optional<quant::TensorType> embd;    // token_embd override
  std::optional<quant::TensorType> output;  // output.weight override (and tied embedding)
  uint32_t file_type = 0;                   // general.file_type (llama_ftype)
};

// "Q4_0", "q8_0", "F16", "Q4_K_M", "Q5_K_M", "Q4_K_S", "MXFP4", ... Error lists the known names.
Result<QuantMix> parse_quant_mix(std::string_view name);

enum class TensorRole {
  kEmbedding,
  kOutput,
  kAttnV,
  kFfnGateUp,  // ffn_gate / ffn_up: as kOtherMatrix except under the MXFP4 mix
  kFfnDown,
  kOtherMatrix,
  kVector
};

// The type for one tensor. `layer`/`n_layer` matter for the _M rules; `row_len`
// for the K-quant fallback; `tied` means the embedding doubles as the output.
quant::TensorType choose_type(const QuantMix& mix, TensorRole role, int layer, int n_layer,
                              int64_t row_len, bool tied);

}  // namespace minfer::synth
