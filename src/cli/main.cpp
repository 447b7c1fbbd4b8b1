// Entry point of the `minfer` command: dispatches to a subcommand by name.
#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/command.h"

namespace {

void print_usage() {
  std::fprintf(stderr, "usage: minfer <command> [options]\n\ncommands:\n");
  for (const auto& c : minfer::cli::commands()) {
    std::fprintf(stderr, "  %-12.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(stderr, "\nRun `minfer <command> --help` for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage();
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage();
    return 0;
  }
  std::vector<std::string_view> args(argv + 2, argv + argc);
  for (const auto& c : minfer::cli::commands()) {
    if (c.name == name) return c.run(args);
  }
  std::fprintf(stderr, "minfer: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
