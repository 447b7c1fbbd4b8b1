// Model: a loaded GGUF model — the mapped file, its hyper-parameters, weight
// table and tokenizer.
//
// Contract: load() opens and validates everything up front (file, metadata,
// shapes, vocabulary), so a Model that exists can build graphs. Errors name
// the file and the offending key or tensor. `progress` is called with a
// fraction in [0, 1] while weights are touched into memory (the warm-up that
// moves first-use page faults out of the first prompt).
// Ownership: the Model owns the mapping; weights and tokenizer views are
// valid while it lives. Immutable after load: share it across threads freely.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "gguf/file.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace minfer::model {

class Model {
 public:
  using Progress = std::function<void(double)>;
  static Result<std::unique_ptr<Model>> load(const std::string& path,
                                             const Progress& progress = {});

  const gguf::File& file() const { return *file_; }
  const HParams& hparams() const { return hparams_; }
  const Weights& weights() const { return weights_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  const std::string& path() const { return path_; }
  // Short description: "gemma3 18 layers, d 640, 268.1M params, 241.4 MiB"
  // (a mixture of experts adds ", 8 of 128 experts").
  std::string describe() const;

 private:
  Model(std::string path, std::unique_ptr<gguf::File> file, HParams hp, Weights w,
        tokenizer::Tokenizer tok)
      : path_(std::move(path)),
        file_(std::move(file)),
        hparams_(std::move(hp)),
        weights_(std::move(w)),
        tokenizer_(std::move(tok)) {}

  std::string path_;
  std::unique_ptr<gguf::File> file_;
  HParams hparams_;
  Weights weights_;
  tokenizer::Tokenizer tokenizer_;
};

}  // namespace minfer::model
