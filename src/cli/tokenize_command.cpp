// `minfer tokenize`: prints the tokens of a text, like llama-tokenize.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"

namespace minfer::cli {
namespace {

Status run(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_prompt(p));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/true));
  const tokenizer::Tokenizer& tok = model->tokenizer();
  auto ids = tok.encode(text, /*add_special=*/!p.has("--no-bos"),
                        /*parse_special=*/!p.has("--no-parse-special"));
  if (!ids) return ids.status().with_context("text");
  if (p.has("--ids")) {
    std::printf("[");
    for (size_t i = 0; i < ids->size(); ++i) std::printf("%s%d", i ? ", " : "", (*ids)[i]);
    std::printf("]\n");
  } else {
    for (int32_t id : *ids) {
      std::printf("%6d -> '%s'\n", id, tok.token_to_piece(id).c_str());
    }
  }
  if (p.has("--show-count")) std::printf("Total number of tokens: %zu\n", ids->size());
  return Status::ok();
}

}  // namespace

int run_tokenize(std::span<const std::string_view> args) {
  ArgParser p("tokenize", "-m MODEL.gguf -p TEXT [--ids]");
  p.option("-m,--model", "FILE", "GGUF model file (its vocabulary is used)");
  p.option("-p,--prompt", "TEXT", "text to tokenize");
  p.option("-f,--file", "FILE", "read the text from FILE");
  p.flag("--ids", "print only the ids, as [id, id, ...]");
  p.flag("--no-bos", "do not add BOS even if the vocabulary asks for it");
  p.flag("--no-parse-special", "treat special-token text as plain text");
  p.flag("--show-count", "print the number of tokens");
  return parse_and_run(p, "tokenize", args, run);
}

}  // namespace minfer::cli
