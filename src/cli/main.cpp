// Entry point of the `minfer` command: dispatches to a subcommand by name.
#include <cstdio>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/output.h"

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
    if (c.name != name) continue;
    if (const auto& env = minfer::cli::environment(); !env) {
      std::fprintf(stderr, "minfer %s: %s\n", argv[1],
                   minfer::printable_text(env.message()).c_str());
      return 2;
    }
    const int code = c.run(args);
    // Output printed with printf is checked here, once: a command whose
    // results could not be written has failed. One that failed already said why.
    const minfer::Status written = minfer::cli::finish_stdout();
    return code == 0 ? minfer::cli::report(c.name, written) : code;
  }
  std::fprintf(stderr, "minfer: unknown command '%s'\n\n", minfer::printable_text(name).c_str());
  print_usage();
  return 2;
}
