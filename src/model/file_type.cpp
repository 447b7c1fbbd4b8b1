#include "model/file_type.h"

#include <cstdio>
#include <map>

namespace minfer::model {
namespace {

// llama.cpp's llama_ftype values (general.file_type) and its names for them.
struct FileTypeName {
  uint32_t file_type;
  std::string_view name;
};
constexpr FileTypeName kFileTypes[] = {
    {0, "all F32"},        {1, "F16"},
    {2, "Q4_0"},           {3, "Q4_1"},
    {7, "Q8_0"},           {8, "Q5_0"},
    {9, "Q5_1"},           {10, "Q2_K - Medium"},
    {11, "Q3_K - Small"},  {12, "Q3_K - Medium"},
    {13, "Q3_K - Large"},  {14, "Q4_K - Small"},
    {15, "Q4_K - Medium"}, {16, "Q5_K - Small"},
    {17, "Q5_K - Medium"}, {18, "Q6_K"},
    {21, "Q2_K - Small"},  {32, "BF16"},
    {38, "MXFP4 MoE"},
};
constexpr uint32_t kGuessed = 1024;

// Sizes models are published under, in parameters. A count takes the largest
// one at most 4 % above it and at least 75 % of it: Qwen2.5-7B's 7.62e9 is
// "7B", Qwen2.5-0.5B's 4.94e8 "0.5B", Llama 3.2 1B's 1.24e9 "1B".
struct NominalSize {
  double params;
  std::string_view label;
};
constexpr NominalSize kNominalSizes[] = {
    {135e6, "135M"}, {270e6, "270M"}, {360e6, "360M"}, {0.5e9, "0.5B"}, {0.6e9, "0.6B"},
    {1e9, "1B"},     {1.5e9, "1.5B"}, {1.7e9, "1.7B"}, {2e9, "2B"},     {3e9, "3B"},
    {4e9, "4B"},     {7e9, "7B"},     {8e9, "8B"},     {9e9, "9B"},     {12e9, "12B"},
    {13e9, "13B"},   {14e9, "14B"},   {27e9, "27B"},   {32e9, "32B"},   {70e9, "70B"},
};

// The count itself, two or three significant digits: "1.3M", "420K", "7.6B".
std::string count_label(double n) {
  const char* suffix = "B";
  double scaled = n / 1e9;
  if (n < 1e6) {
    suffix = "K", scaled = n / 1e3;
  } else if (n < 1e9) {
    suffix = "M", scaled = n / 1e6;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), scaled < 10 ? "%.1f%s" : "%.0f%s", scaled, suffix);
  return buf;
}

// The type holding the most bytes of 2-D tensors: the file's main type.
quant::TensorType main_matrix_type(const Weights& weights) {
  std::map<quant::TensorType, uint64_t> by_type;
  for (const auto& w : weights.all()) {
    if (w.dims.size() >= 2) by_type[w.type] += w.nbytes;
  }
  quant::TensorType main = quant::TensorType::F32;
  uint64_t most = 0;
  for (auto [type, bytes] : by_type) {
    if (bytes > most) most = bytes, main = type;
  }
  return main;
}

}  // namespace

std::optional<std::string> file_type_name(uint32_t file_type) {
  const bool guessed = (file_type & kGuessed) != 0;
  const uint32_t base = file_type & ~kGuessed;
  for (const auto& t : kFileTypes) {
    if (t.file_type == base) return std::string(t.name) + (guessed ? " (guessed)" : "");
  }
  return std::nullopt;
}

std::string size_label(int64_t n_params) {
  const double n = static_cast<double>(n_params);
  const NominalSize* best = nullptr;
  for (const auto& s : kNominalSizes) {
    if (s.params <= n * 1.04 && s.params >= n * 0.75) best = &s;
  }
  return best != nullptr ? std::string(best->label) : count_label(n);
}

int64_t parameter_count(const Weights& weights) {
  int64_t n = 0;
  for (const auto& w : weights.all()) n += w.row_length() * w.rows();
  return n;
}

std::string model_type_label(const Model& model) {
  std::optional<std::string> type;
  if (auto ft = model.file().get_u32("general.file_type"); ft.is_ok()) type = file_type_name(*ft);
  if (!type) type = std::string(quant::type_name(main_matrix_type(model.weights())));
  return model.hparams().arch_name + " " + size_label(parameter_count(model.weights())) + " " +
         *type;
}

}  // namespace minfer::model
