// `minfer run`: generate text from a prompt, streaming tokens to stdout and
// timings to stderr.
#include <cstdio>
#include <utility>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/interrupt.h"
#include "cli/output.h"
#include "cli/speculative_options.h"
#include "runtime/generate.h"

namespace minfer::cli {
namespace {

Status run(const ArgParser& p, bool& interrupted) {
  MINFER_ASSIGN_OR_RETURN(std::string prompt, read_prompt(p));
  MINFER_ASSIGN_OR_RETURN(int64_t n_predict, p.get_int("--n-predict", 128, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(runtime::SamplerParams sp, sampler_params(p));
  MINFER_RETURN_IF_ERROR(runtime::Sampler::create(sp).status());  // bad settings first
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions config, run_options(p, 4096));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p));
  config.n_ctx = std::min<int64_t>(config.n_ctx, model->hparams().n_ctx_train);
  const tokenizer::Tokenizer& tok = model->tokenizer();
  auto tokens = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (!tokens) return tokens.status().with_context("prompt");
  if (static_cast<int64_t>(tokens->size()) >= config.n_ctx) {
    return Status::out_of_range("the prompt has " + std::to_string(tokens->size()) +
                                " tokens, more than the context of " +
                                std::to_string(config.n_ctx) + " allows (raise it with -c)");
  }
  MINFER_ASSIGN_OR_RETURN(const Speculation spec, speculation(p, *model, config));
  runtime::EngineOptions engine_options = solo_engine_options(config);
  if (spec.on()) {
    // Checking a draft in one chunk gives each row the logits of a
    // one-token step only with the batch-invariant kernels (docs/ENGINE.md
    // "Speculative decoding"): on unless MINFER_BATCH_INVARIANT=0.
    engine_options.options.batch_invariant = config.options.batch_invariant;
    engine_options.drafter = spec.drafter;
  }
  MINFER_ASSIGN_OR_RETURN(auto engine, runtime::Engine::create(*model, engine_options));
  // Ctrl-C ends the generation and the summary still follows; installed
  // before the "seed:" line, so that a caller who waits for it can signal.
  Interrupts interrupts;
  std::fprintf(stderr, "seed: %llu, context: %lld, prompt: %zu tokens\n",
               static_cast<unsigned long long>(sp.seed), static_cast<long long>(config.n_ctx),
               tokens->size());
  tokenizer::Detokenizer detok(tok, /*render_special=*/false);
  if (!p.has("--no-display-prompt")) MINFER_RETURN_IF_ERROR(write_stdout(prompt));
  const int64_t budget =
      std::min<int64_t>(n_predict, config.n_ctx - static_cast<int64_t>(tokens->size()));
  Status written;  // the first failed write stops generation: nobody reads the rest
  runtime::Request request(*tokens, sp, budget);
  request.speculative = spec.params;
  auto stats = runtime::generate(*engine, std::move(request), [&](int32_t t) {
    written = write_stdout(detok.push(t));
    return written.is_ok() && !interrupts.requested();
  });
  interrupted = interrupts.requested();
  MINFER_RETURN_IF_ERROR(written);
  MINFER_RETURN_IF_ERROR(write_stdout(detok.flush() + "\n"));
  if (!stats) return stats.status();
  const auto& s = *stats;
  // The context cut the run short only when it, not an end-of-generation
  // token, ended it: every token of the reduced budget was generated.
  const bool at_context_limit = budget < n_predict && !s.stopped_at_eog && s.generated == budget;
  std::fprintf(stderr,
               "prompt: %lld tokens in %.2f s (%.1f t/s); generation: %lld tokens in "
               "%.2f s (%.1f t/s)%s\n",
               static_cast<long long>(s.prompt_tokens), s.prompt_seconds,
               s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0,
               static_cast<long long>(s.generated), s.generation_seconds,
               s.generation_seconds > 0 ? s.generated / s.generation_seconds : 0.0,
               interrupted        ? " (interrupted)"
               : at_context_limit ? " (stopped at the context limit)"
                                  : "");
  if (spec.on()) {
    std::fprintf(
        stderr, "speculative: %lld drafted, %lld accepted (%.1f%%), %.2f tokens per step\n",
        static_cast<long long>(s.drafted), static_cast<long long>(s.draft_accepted),
        s.drafted > 0
            ? 100.0 * static_cast<double>(s.draft_accepted) / static_cast<double>(s.drafted)
            : 0.0,
        s.decode_steps > 0 ? static_cast<double>(s.generated) / static_cast<double>(s.decode_steps)
                           : 0.0);
  }
  if (!engine->op_profile().empty()) {
    std::fprintf(stderr, "%s", engine->op_profile().table().c_str());
  }
  return Status::ok();
}

}  // namespace

int run_run(std::span<const std::string_view> args) {
  ArgParser p("run", "-m MODEL.gguf -p PROMPT [-n N] [options]");
  add_model_options(p);
  p.option("-p,--prompt", "TEXT", "prompt text");
  p.option("-f,--file", "FILE", "read the prompt from FILE");
  p.option("-n,--n-predict", "N", "tokens to generate (128)");
  p.flag("--no-display-prompt", "do not echo the prompt before the generated text");
  add_sampling_options(p);
  add_speculative_options(p);
  bool interrupted = false;
  const int code =
      parse_and_run(p, "run", args, [&](const ArgParser& a) { return run(a, interrupted); });
  return code == 0 && interrupted ? 130 : code;
}

}  // namespace minfer::cli
