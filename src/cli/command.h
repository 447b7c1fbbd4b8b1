// One `minfer` subcommand: its name, a one-line summary, and its entry point.
//
// Contract: run() receives the arguments after the subcommand name and returns
// the process exit code (0 success, 1 runtime error, 2 usage error). It prints
// results to stdout and diagnostics to stderr; it never calls exit().
#pragma once

#include <span>
#include <string_view>

namespace minfer::cli {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string_view> args);
};

// The table of every subcommand, in the order `minfer --help` lists them.
std::span<const Command> commands();

}  // namespace minfer::cli
