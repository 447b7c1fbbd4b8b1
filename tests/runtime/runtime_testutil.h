// Helpers for the runtime tests: tiny synthetic models, written once per test
// binary (seed 5 and Q8_0 unless asked otherwise) into a per-process directory
// removed at exit, and kept loaded for the whole run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"
#include "synth/synth.h"

namespace minfer::runtime::testing {

// n token ids in [3, 253) from a small LCG: a prompt for a tiny model.
inline std::vector<int32_t> prompt_tokens(int n, int32_t seed) {
  std::vector<int32_t> p;
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p.push_back(static_cast<int32_t>(3 + (x >> 8) % 250));
  }
  return p;
}

// Greedy sampling (temperature 0): the tokens the engine tests pin.
inline SamplerParams greedy() {
  SamplerParams s;
  s.temperature = 0.0f;
  return s;
}

inline const model::Model& tiny_model(const std::string& shape, uint64_t seed = 5,
                                      const std::string& quant = "Q8_0") {
  namespace fs = std::filesystem;
  struct Cache {
    fs::path dir = fs::temp_directory_path() / ("minfer_runtime_test_" + std::to_string(getpid()));
    std::map<std::string, std::unique_ptr<model::Model>> models;
    ~Cache() {
      models.clear();
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  static Cache cache;
  const std::string key = shape + "-" + std::to_string(seed) + "-" + quant;
  if (auto it = cache.models.find(key); it != cache.models.end()) return *it->second;
  fs::create_directories(cache.dir);
  synth::SynthOptions o;
  o.shape = shape;
  o.quant = quant;
  o.seed = seed;
  o.output_path = (cache.dir / (key + ".gguf")).string();
  o.n_threads = 2;
  const Status st = synth::synthesize(o);
  if (!st) ADD_FAILURE() << st.message();
  auto m = model::Model::load(o.output_path);
  if (!m) {
    ADD_FAILURE() << m.message();
    std::abort();
  }
  return *(cache.models[key] = std::move(*m));
}

}  // namespace minfer::runtime::testing
