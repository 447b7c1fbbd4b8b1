// Entry points of the `minfer` subcommands (see command.h for the contract).
#pragma once

#include <span>
#include <string_view>

namespace minfer::cli {

int run_version(std::span<const std::string_view> args);
int run_synth(std::span<const std::string_view> args);
int run_inspect(std::span<const std::string_view> args);
int run_run(std::span<const std::string_view> args);
int run_chat(std::span<const std::string_view> args);
int run_perplexity(std::span<const std::string_view> args);
int run_tokenize(std::span<const std::string_view> args);
int run_bench(std::span<const std::string_view> args);
int run_batched_bench(std::span<const std::string_view> args);
int run_serve(std::span<const std::string_view> args);
int run_tp_worker(std::span<const std::string_view> args);

}  // namespace minfer::cli
