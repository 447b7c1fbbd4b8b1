// How llama.cpp names a model file: the general.file_type label ("Q4_K -
// Medium") and the model description llama-bench prints in its model column
// ("gemma3 270M Q4_K - Medium": architecture, size class, file type).
//
// Contract: file_type_name() knows the llama_ftype values of the types this
// engine reads (F32, F16, BF16, the legacy quants and the K-quant mixes) and
// returns nullopt for any other value; a value with the "guessed" bit (1024)
// is named as its base value plus " (guessed)", as llama.cpp does.
// size_label() names a parameter count by the nominal size models are
// published under ("0.5B" for 4.94e8, "7B" for 7.6e9, "270M" for 2.68e8),
// or by the count itself ("1.3M") when no nominal size is near.
// model_type_label() joins them for a loaded model; the file type falls back
// to the type holding the most matrix bytes when general.file_type is absent
// or unknown. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/model.h"

namespace minfer::model {

std::optional<std::string> file_type_name(uint32_t file_type);

std::string size_label(int64_t n_params);

// Every element of every tensor, as llama.cpp's model_n_params counts.
int64_t parameter_count(const Weights& weights);

std::string model_type_label(const Model& model);

}  // namespace minfer::model
