// The subcommand table of `minfer`.
#include <cstdio>

#include "cli/command.h"

namespace minfer::cli {

int run_version(std::span<const std::string_view>) {
  std::printf("minfer 0.1.0\n");
  return 0;
}

std::span<const Command> commands() {
  static const Command kCommands[] = {
      {"version", "print the version", run_version},
  };
  return kCommands;
}

}  // namespace minfer::cli
