// Command-line options for `minfer` subcommands, with llama.cpp's spellings.
//
// Contract: an ArgParser is declared with the options a command takes
// (aliases such as "-m"/"--model"), then parse() fills their values or returns
// an error naming the offending argument (unknown flag, missing value, value
// that is not a number). Positional arguments are collected in order.
// `--help`/`-h` sets help_requested(). Not thread-safe; one per command run.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::cli {

class ArgParser {
 public:
  ArgParser(std::string command, std::string synopsis);

  // Declares an option taking a value. `names` like "-m,--model".
  void option(std::string_view names, std::string_view value_name, std::string_view help);
  // Declares a boolean flag.
  void flag(std::string_view names, std::string_view help);

  Status parse(std::span<const std::string_view> args);

  bool help_requested() const { return help_; }
  std::string usage() const;

  bool has(std::string_view name) const;
  std::optional<std::string> get(std::string_view name) const;
  std::string get_or(std::string_view name, std::string fallback) const;
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  Result<double> get_double(std::string_view name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  struct Spec {
    std::vector<std::string> names;
    std::string value_name;  // empty for flags
    std::string help;
  };
  const Spec* find(std::string_view name) const;

  std::string command_, synopsis_;
  std::vector<Spec> specs_;
  std::map<std::string, std::string, std::less<>> values_;  // canonical (last) name -> value
  std::vector<std::string> positional_;
  bool help_ = false;
};

// Maps a Status to an exit code, printing an error to stderr as
// "minfer <command>: <message>".
int report(std::string_view command, const Status& status, int error_code = 1);

// The common shape of a subcommand: parse `args` (a usage error prints the
// message and the usage, exit 2), answer --help (usage on stdout, exit 0),
// else run `body` and report its Status (exit 0 or 1).
int parse_and_run(ArgParser& p, std::string_view command, std::span<const std::string_view> args,
                  const std::function<Status(const ArgParser&)>& body);

}  // namespace minfer::cli
