// Helpers the forward-pass tests share (the reference, CUDA and Vulkan
// tests): tiny synthetic models written once per process, every position's
// logits from a Session, and the comparison of two logit sets.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "runtime/session.h"
#include "synth/synth.h"

namespace minfer::model::testing {

// A model of `shape` and `quant` (seed 11; n_layer 0: the preset's layer
// count), synthesized once per process and loaded. The file is removed as
// soon as it is mapped; the mapping keeps the data alive.
inline Result<const Model*> synth_model(const std::string& shape, const std::string& quant,
                                        int n_layer = 0) {
  namespace fs = std::filesystem;
  static std::map<std::string, std::unique_ptr<Model>> models;
  const std::string key = shape + "-" + quant + "-" + std::to_string(n_layer);
  if (auto it = models.find(key); it != models.end()) return it->second.get();
  const fs::path dir =
      fs::temp_directory_path() / ("minfer_model_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  synth::SynthOptions o;
  o.shape = shape;
  o.quant = quant;
  o.n_layer = n_layer;
  o.seed = 11;
  o.n_threads = 2;
  o.output_path = (dir / (key + ".gguf")).string();
  Status s = synth::synthesize(o);
  auto model = s.is_ok() ? Model::load(o.output_path) : Result<std::unique_ptr<Model>>(s);
  fs::remove_all(dir);
  MINFER_RETURN_IF_ERROR(model.status());
  return (models[key] = std::move(model).value()).get();
}

// Every position's logits, [tokens][n_vocab]: the first n_first tokens in
// one eval, then one token per eval.
inline Result<std::vector<float>> eval_positions(runtime::Session& session,
                                                 const std::vector<int32_t>& tokens,
                                                 size_t n_first) {
  std::vector<float> logits;
  const std::span<const int32_t> all(tokens);
  MINFER_ASSIGN_OR_RETURN(auto first, session.eval(all.first(n_first), int64_t(n_first)));
  logits.insert(logits.end(), first.begin(), first.end());
  for (size_t i = n_first; i < tokens.size(); ++i) {
    MINFER_ASSIGN_OR_RETURN(auto next, session.eval(all.subspan(i, 1), 1));
    logits.insert(logits.end(), next.begin(), next.end());
  }
  return logits;
}

// rel (max |a - b| over a row / range of a's row, worst row) and top1 (the
// fraction of rows whose argmax agrees) of two [rows][n_vocab] logit sets.
inline std::pair<double, double> compare_logits(const std::vector<float>& a,
                                                const std::vector<float>& b, int64_t n_vocab) {
  const size_t rows = a.size() / static_cast<size_t>(n_vocab);
  EXPECT_EQ(a.size(), b.size());
  double rel = 0;
  size_t agree = 0;
  for (size_t r = 0; r < rows && a.size() == b.size(); ++r) {
    const float* x = a.data() + r * n_vocab;
    const float* y = b.data() + r * n_vocab;
    const auto [lo, hi] = std::minmax_element(x, x + n_vocab);
    double d = 0;
    for (int64_t i = 0; i < n_vocab; ++i) d = std::max(d, std::fabs(double(x[i]) - y[i]));
    rel = std::max(rel, d / (double(*hi) - *lo));
    agree += (std::max_element(x, x + n_vocab) - x) == (std::max_element(y, y + n_vocab) - y);
  }
  return {rel, rows > 0 ? double(agree) / double(rows) : 0.0};
}

}  // namespace minfer::model::testing
