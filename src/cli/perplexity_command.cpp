// `minfer perplexity`: llama-perplexity's chunked scoring of a text file.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "runtime/perplexity.h"

namespace minfer::cli {
namespace {

Status run(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_prompt(p));
  MINFER_ASSIGN_OR_RETURN(int64_t n_chunks, p.get_int("--chunks", -1));
  MINFER_ASSIGN_OR_RETURN(runtime::SessionOptions so, session_options(p, 512));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  const tokenizer::Tokenizer& tok = model->tokenizer();
  auto tokens = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (!tokens) return tokens.status().with_context("text");
  const int64_t n_ctx = so.n_ctx;
  MINFER_ASSIGN_OR_RETURN(auto session, runtime::Session::create(*model, so));
  std::fprintf(
      stderr, "perplexity: %zu tokens, context %lld, %lld chunks\n", tokens->size(),
      static_cast<long long>(n_ctx),
      static_cast<long long>(n_chunks > 0 ? std::min<int64_t>(n_chunks, tokens->size() / n_ctx)
                                          : static_cast<int64_t>(tokens->size()) / n_ctx));
  FILE* dump = nullptr;
  if (auto path = p.get("--logits-out")) {
    dump = std::fopen(path->c_str(), "wb");
    if (dump == nullptr) return Status::error("cannot write '" + *path + "'");
  }
  auto r = runtime::perplexity(*session, *tokens, n_ctx, n_chunks,
                               [&](int64_t c, double ppl, std::span<const float> logits) {
                                 std::printf("[%lld]%.4f,", static_cast<long long>(c + 1), ppl);
                                 std::fflush(stdout);
                                 if (dump) std::fwrite(logits.data(), 4, logits.size(), dump);
                               });
  if (dump) std::fclose(dump);
  std::printf("\n");
  if (!r) return r.status();
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r->ppl, r->ppl_error);
  return Status::ok();
}

}  // namespace

int run_perplexity(std::span<const std::string_view> args) {
  ArgParser p("perplexity", "-m MODEL.gguf -f TEXT_FILE [-c 512] [--chunks N]");
  add_model_options(p);
  p.option("-f,--file", "FILE", "text to score");
  p.option("-p,--prompt", "TEXT", "text to score, inline");
  p.option("--chunks", "N", "score at most N chunks (all)");
  p.option("--logits-out", "FILE", "write the scored logits (f32, chunk by chunk) to FILE");
  return parse_and_run(p, "perplexity", args, run);
}

}  // namespace minfer::cli
