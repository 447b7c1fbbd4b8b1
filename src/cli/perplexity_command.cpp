// `minfer perplexity`: llama-perplexity's chunked scoring of a text file.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/output.h"
#include "runtime/perplexity.h"

namespace minfer::cli {
namespace {

// --chunks absent: every chunk the text holds.
constexpr int64_t kAllChunks = 0;

Status run(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_prompt(p));
  MINFER_ASSIGN_OR_RETURN(int64_t n_chunks, p.get_int("--chunks", kAllChunks, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions config, run_options(p, 512));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  const int64_t n_ctx_train = model->hparams().n_ctx_train;
  if (config.n_ctx > n_ctx_train) {
    return Status::out_of_range(p.spelled("--ctx-size") +
                                ": more than the model's training context of " +
                                std::to_string(n_ctx_train) + " tokens");
  }
  const tokenizer::Tokenizer& tok = model->tokenizer();
  auto tokens = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (!tokens) return tokens.status().with_context("text");
  const int64_t n_ctx = config.n_ctx;
  const auto n_tokens = static_cast<int64_t>(tokens->size());
  // Checked before the engine allocates a cache for n_ctx tokens.
  if (n_tokens < n_ctx) {
    return Status::invalid_argument("the text has " + std::to_string(n_tokens) +
                                    " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                                    " (lower it with -c)");
  }
  MINFER_ASSIGN_OR_RETURN(auto engine, solo_engine(*model, config));
  const int64_t chunks =
      n_chunks == kAllChunks ? n_tokens / n_ctx : std::min(n_chunks, n_tokens / n_ctx);
  std::fprintf(stderr, "perplexity: %lld tokens, context %lld, %lld chunks\n",
               static_cast<long long>(n_tokens), static_cast<long long>(n_ctx),
               static_cast<long long>(chunks));
  const auto logits_path = p.get("--logits-out");
  FILE* dump = nullptr;
  if (logits_path) {
    dump = std::fopen(logits_path->c_str(), "wb");
    if (dump == nullptr) {
      return Status::io_error("cannot write '" + *logits_path + "': " + std::strerror(errno));
    }
  }
  runtime::PerplexityOptions po;
  po.n_ctx = n_ctx;
  po.n_chunks = n_chunks;
  po.with_logits = dump != nullptr;
  po.progress = [&](int64_t c, double ppl, std::span<const float> logits) -> Status {
    char line[64];
    std::snprintf(line, sizeof(line), "[%lld]%.4f,", static_cast<long long>(c + 1), ppl);
    MINFER_RETURN_IF_ERROR(write_stdout(line));
    if (dump && std::fwrite(logits.data(), 4, logits.size(), dump) != logits.size()) {
      return Status::io_error("cannot write '" + *logits_path + "': " + std::strerror(errno));
    }
    return Status::ok();
  };
  auto r = runtime::perplexity(*engine, *tokens, po);
  if (dump && std::fclose(dump) != 0 && r) {
    return Status::io_error("cannot write '" + *logits_path + "': " + std::strerror(errno));
  }
  MINFER_RETURN_IF_ERROR(write_stdout("\n"));
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
  p.option("--chunks", "N", "score at most N chunks, N >= 1 (all)");
  p.option("--logits-out", "FILE", "write the scored logits (f32, chunk by chunk) to FILE");
  return parse_and_run(p, "perplexity", args, run);
}

}  // namespace minfer::cli
