// Entry points of the `minfer` subcommands (see command.h for the contract).
#pragma once

#include <span>
#include <string_view>

namespace minfer::cli {

int run_version(std::span<const std::string_view> args);
int run_synth(std::span<const std::string_view> args);
int run_inspect(std::span<const std::string_view> args);

}  // namespace minfer::cli
