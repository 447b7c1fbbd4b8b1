#include "model/model.h"

#include <cstdio>
#include <filesystem>

#include "quant/reference.h"
#include "tokenizer/gguf_vocab.h"

namespace minfer::model {

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const Progress& progress) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::not_found("model file '" + path + "' does not exist");
  }
  MINFER_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::open(path));
  auto hp = load_hparams(*file);
  if (!hp) return hp.status().with_context(path);
  auto vocab = tokenizer::vocab_from_gguf(*file);
  if (!vocab) return vocab.status().with_context(path);
  if (static_cast<int64_t>(vocab->tokens.size()) != hp->n_vocab) {
    return Status::invalid_argument(
        path + ": tokenizer has " + std::to_string(vocab->tokens.size()) +
        " tokens but token_embd.weight has " + std::to_string(hp->n_vocab) + " rows");
  }
  auto tok = tokenizer::Tokenizer::create(std::move(*vocab));
  if (!tok) return tok.status().with_context(path + ": tokenizer");
  for (const auto& t : file->tensors()) {
    if (quant::is_weight_type(t.type)) continue;
    return Status::unimplemented(
        path + ": tensor '" + t.name + "' has type " + std::string(quant::type_name(t.type)) +
        ", which minfer cannot compute (supported: " + quant::weight_type_names() + ")");
  }
  Weights weights = Weights::from_file(*file);
  // Touch the weights tensor by tensor so the progress bar tracks real work.
  const auto& all = weights.all();
  size_t total = 0, done = 0;
  for (const auto& w : all) total += w.nbytes;
  volatile uint8_t sink = 0;
  for (const auto& w : all) {
    uint8_t acc = 0;
    for (size_t off = 0; off < w.nbytes; off += 4096) acc ^= w.data[off];
    sink = sink ^ acc;
    done += w.nbytes;
    if (progress && total > 0) progress(static_cast<double>(done) / static_cast<double>(total));
  }
  (void)sink;
  return std::unique_ptr<Model>(
      new Model(path, std::move(file), std::move(*hp), std::move(weights), std::move(*tok)));
}

std::string Model::describe() const {
  int64_t params = 0;
  size_t bytes = 0;
  for (const auto& w : weights_.all()) {
    params += w.row_length() * w.rows();
    bytes += w.nbytes;
  }
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s, %lld layers, d %lld, %.1fM params, %.1f MiB",
                hparams_.arch_name.c_str(), static_cast<long long>(hparams_.n_layer),
                static_cast<long long>(hparams_.n_embd), static_cast<double>(params) / 1e6,
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  if (hparams_.is_moe()) {  // "..., 8 of 128 experts"
    return std::string(buf) + ", " + std::to_string(hparams_.n_expert_used) + " of " +
           std::to_string(hparams_.n_expert) + " experts";
  }
  return buf;
}

}  // namespace minfer::model
