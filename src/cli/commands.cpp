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
      {"inspect", "print a GGUF file's metadata and tensor table", run_inspect},
      {"synth", "write a synthetic GGUF model with a real shape", run_synth},
      {"version", "print the version", run_version},
  };
  return kCommands;
}

}  // namespace minfer::cli
