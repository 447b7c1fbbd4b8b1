// A synthetic model whose metadata (and tensor list) a test rewrites before
// reading its hyper-parameters: each case edits one thing and checks what
// load_hparams() makes of it. Tensor data is copied as it is.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "model/hparams.h"
#include "synth/synth.h"

namespace minfer::model::testing {

class EditableModel {
 public:
  using Edit = std::function<void(gguf::Writer&)>;

  EditableModel(const std::string& shape, const std::string& quant) {
    dir_ = std::filesystem::temp_directory_path() /
           ("minfer_hparams_" + shape + "_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    synth::SynthOptions o;
    o.shape = shape;
    o.quant = quant;
    o.seed = 3;
    o.n_threads = 2;
    o.output_path = (dir_ / "base.gguf").string();
    status_ = synth::synthesize(o);
  }
  ~EditableModel() { std::filesystem::remove_all(dir_); }
  EditableModel(const EditableModel&) = delete;
  EditableModel& operator=(const EditableModel&) = delete;

  const Status& status() const { return status_; }

  // The base file with `edit` applied to its metadata and the tensors named
  // in `drop` left out, then load_hparams.
  Result<HParams> load(const Edit& edit, const std::set<std::string>& drop = {}) const {
    MINFER_ASSIGN_OR_RETURN(auto base, gguf::File::open((dir_ / "base.gguf").string()));
    gguf::Writer w;
    for (const auto& [key, value] : base->metadata()) w.set(key, value);
    for (const gguf::TensorInfo& t : base->tensors()) {
      if (drop.count(t.name) != 0) continue;
      MINFER_RETURN_IF_ERROR(
          w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes)));
    }
    edit(w);
    const std::string path = (dir_ / "edited.gguf").string();
    MINFER_RETURN_IF_ERROR(w.write(path));
    MINFER_ASSIGN_OR_RETURN(auto file, gguf::File::open(path));
    return load_hparams(*file);
  }

  // Loading with `edit` (and `drop`) fails with a message naming `name`.
  void expect_refused(const Edit& edit, const std::string& name,
                      const std::set<std::string>& drop = {}) const {
    auto h = load(edit, drop);
    ASSERT_FALSE(h.is_ok()) << name;
    EXPECT_NE(h.message().find("'" + name + "'"), std::string::npos) << h.message();
  }

 private:
  std::filesystem::path dir_;
  Status status_;
};

}  // namespace minfer::model::testing
