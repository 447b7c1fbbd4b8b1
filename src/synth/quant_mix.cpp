#include "synth/quant_mix.h"

#include <cctype>

namespace minfer::synth {
namespace {

using quant::TensorType;

bool is_k_quant(TensorType t) {
  return t == TensorType::Q2_K || t == TensorType::Q3_K || t == TensorType::Q4_K ||
         t == TensorType::Q5_K || t == TensorType::Q6_K;
}

bool is_legacy_quant(TensorType t) {
  return t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q5_0 ||
         t == TensorType::Q5_1 || t == TensorType::Q8_0;
}

// llama_ftype values, as general.file_type stores them.
uint32_t plain_file_type(TensorType t) {
  switch (t) {
    case TensorType::F32:
      return 0;
    case TensorType::F16:
      return 1;
    case TensorType::Q4_0:
      return 2;
    case TensorType::Q4_1:
      return 3;
    case TensorType::Q8_0:
      return 7;
    case TensorType::Q5_0:
      return 8;
    case TensorType::Q5_1:
      return 9;
    case TensorType::Q2_K:
      return 10;
    case TensorType::Q3_K:
      return 12;
    case TensorType::Q4_K:
      return 14;
    case TensorType::Q5_K:
      return 16;
    case TensorType::Q6_K:
      return 18;
    case TensorType::BF16:
      return 32;
    default:
      return 0;
  }
}

// llama_ftype's LLAMA_FTYPE_MOSTLY_MXFP4_MOE.
constexpr uint32_t kMxfp4MoeFileType = 38;

// The MXFP4 mix: FFN matrices in MXFP4, every other matrix in Q8_0 (as
// llama-quantize's MXFP4_MOE treats the expert and the other tensors).
TensorType mxfp4_mix_type(const QuantMix& mix, TensorRole role, bool tied) {
  if (role == TensorRole::kFfnGateUp || role == TensorRole::kFfnDown) return TensorType::MXFP4;
  const TensorType output = mix.output.value_or(TensorType::Q8_0);
  if (role == TensorRole::kOutput) return output;
  if (role == TensorRole::kEmbedding) return mix.embd.value_or(tied ? output : TensorType::Q8_0);
  return TensorType::Q8_0;
}

// The layers that get more bits under the _M mixes: the first and last eighth,
// and every third layer in between.
bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A 256-element super-block cannot tile a row whose length is not a multiple
// of 256; llama.cpp then picks these 32-element types.
TensorType fallback_for_row(TensorType t, int64_t row_len) {
  if (!is_k_quant(t) || row_len % 256 == 0) return t;
  switch (t) {
    case TensorType::Q2_K:
    case TensorType::Q3_K:
      return TensorType::Q4_0;
    case TensorType::Q4_K:
      return TensorType::Q5_0;
    case TensorType::Q5_K:
      return TensorType::Q5_1;
    default:
      return TensorType::Q8_0;
  }
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<QuantMix> parse_quant_mix(std::string_view name) {
  const std::string n = upper(name);
  struct Named {
    const char* name;
    TensorType base;
    uint32_t file_type;
  };
  static constexpr Named kMixes[] = {
      {"Q4_K_M", TensorType::Q4_K, 15}, {"Q5_K_M", TensorType::Q5_K, 17},
      {"Q4_K_S", TensorType::Q4_K, 14}, {"Q5_K_S", TensorType::Q5_K, 16},
      {"Q3_K_M", TensorType::Q3_K, 12},
  };
  for (const auto& m : kMixes) {
    if (n == m.name) {
      QuantMix mix{m.name, m.base, n.ends_with("_M"), std::nullopt, std::nullopt, m.file_type};
      return mix;
    }
  }
  if (n == "MXFP4") {
    return QuantMix{n, TensorType::MXFP4, false, std::nullopt, std::nullopt, kMxfp4MoeFileType};
  }
  auto type = quant::parse_tensor_type(n);
  const bool plain =
      type.is_ok() && (is_k_quant(*type) || is_legacy_quant(*type) || *type == TensorType::F32 ||
                       *type == TensorType::F16 || *type == TensorType::BF16);
  if (!plain) {
    return Status::invalid_argument(
        "unknown quantization '" + std::string(name) +
        "' (known: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, "
        "Q4_K, Q5_K, Q6_K, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, MXFP4)");
  }
  return QuantMix{n, *type, false, std::nullopt, std::nullopt, plain_file_type(*type)};
}

TensorType choose_type(const QuantMix& mix, TensorRole role, int layer, int n_layer,
                       int64_t row_len, bool tied) {
  if (role == TensorRole::kVector) return TensorType::F32;
  const TensorType base = mix.base;
  if (base == TensorType::MXFP4) return mxfp4_mix_type(mix, role, tied);
  // Embedding and output: Q8_0 next to legacy types, Q6_K next to K-quants,
  // unchanged for float files (the composition of ANCHORS.md's files).
  TensorType edge = is_k_quant(base)        ? TensorType::Q6_K
                    : is_legacy_quant(base) ? TensorType::Q8_0
                                            : base;
  TensorType t = base;
  if (role == TensorRole::kOutput || (role == TensorRole::kEmbedding && tied)) {
    t = mix.output.value_or(edge);
    if (role == TensorRole::kEmbedding && mix.embd) t = *mix.embd;
  } else if (role == TensorRole::kEmbedding) {
    t = mix.embd.value_or(mix.k_mix ? base : edge);
  } else if (mix.k_mix && (role == TensorRole::kAttnV || role == TensorRole::kFfnDown) &&
             use_more_bits(layer, n_layer)) {
    t = TensorType::Q6_K;
  }
  return fallback_for_row(t, row_len);
}

}  // namespace minfer::synth
