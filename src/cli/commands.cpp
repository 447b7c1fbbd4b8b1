// The subcommand table of `minfer`.
#include "cli/commands.h"

#include <cstdio>

#include "cli/command.h"

namespace minfer::cli {

int run_version(std::span<const std::string_view>) {
  std::printf("minfer 0.1.0\n");
  return 0;
}

std::span<const Command> commands() {
  static const Command kCommands[] = {
      {"run", "generate text from a prompt", run_run},
      {"chat", "talk with a model interactively", run_chat},
      {"perplexity", "score a text file (llama-perplexity's method)", run_perplexity},
      {"bench", "measure prompt and generation speed (llama-bench's tests)", run_bench},
      {"batched-bench", "measure many sequences decoded together (llama-batched-bench's tests)",
       run_batched_bench},
      {"serve", "an OpenAI-compatible HTTP server (chat/completions, completions, models)",
       run_serve},
      {"tp-worker", "one tensor-parallel rank of a model split over processes (-tp, --tp-init)",
       run_tp_worker},
      {"tokenize", "print the tokens of a text", run_tokenize},
      {"inspect", "print a GGUF file's metadata and tensor table", run_inspect},
      {"synth", "write a synthetic GGUF model with a real shape", run_synth},
      {"version", "print the version", run_version},
  };
  return kCommands;
}

}  // namespace minfer::cli
