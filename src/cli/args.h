// Command-line options for `minfer` subcommands, with llama.cpp's spellings.
//
// Contract: an ArgParser is declared with the options a command takes
// (aliases such as "-m"/"--model") and the positional arguments it accepts
// (none unless positional() says so), then parse() fills their values or
// returns an error naming the offending argument (unknown flag, missing value,
// an argument the command does not take). `--` ends the options: what follows
// is positional. The typed getters parse a value into its full range and
// reject one outside [min, max] with a message naming the flag as the user
// spelled it, the value and the range. `--help`/`-h` sets help_requested().
// Not thread-safe; one per command run.
#pragma once

#include <cstdint>
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
  // Accepts up to `max_count` positional arguments, shown as `name` in errors.
  void positional(std::string_view name, size_t max_count);

  Status parse(std::span<const std::string_view> args);

  bool help_requested() const { return help_; }
  std::string usage() const;

  bool has(std::string_view name) const;
  std::optional<std::string> get(std::string_view name) const;
  std::string get_or(std::string_view name, std::string fallback) const;
  // The value as an integer in [min, max], or `fallback` when absent.
  Result<int64_t> get_int(std::string_view name, int64_t fallback, int64_t min, int64_t max) const;
  // The value as a finite number in [min, max], or `fallback` when absent.
  Result<double> get_double(std::string_view name, double fallback, double min, double max) const;
  // The value as an unsigned 64-bit integer (no sign allowed), or `fallback`.
  Result<uint64_t> get_u64(std::string_view name, uint64_t fallback) const;
  // "-t 5" as the user wrote it (their spelling of the flag), for messages.
  std::string spelled(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  struct Spec {
    std::vector<std::string> names;
    std::string value_name;  // empty for flags
    std::string help;
  };
  struct Given {
    std::string value;
    std::string spelling;  // the name the user typed ("-t" or "--threads")
  };
  const Spec* find(std::string_view name) const;
  const Given* given(std::string_view name) const;
  Status add_positional(std::string_view arg, bool after_dashes);

  std::string command_, synopsis_;
  std::vector<Spec> specs_;
  std::map<std::string, Given, std::less<>> values_;  // canonical (last) name -> value
  std::vector<std::string> positional_;
  std::string positional_name_;
  size_t max_positional_ = 0;
  bool help_ = false;
};

// Maps a Status to an exit code, printing an error to stderr as
// "minfer <command>: <message>".
int report(std::string_view command, const Status& status, int error_code = 1);

// Parses `args`: a usage error prints the message and the usage (returns 2),
// --help prints the usage on stdout (returns 0); nullopt means carry on.
std::optional<int> parse_command_line(ArgParser& p, std::string_view command,
                                      std::span<const std::string_view> args);

// The common shape of a subcommand: parse `args` (a usage error prints the
// message and the usage, exit 2), answer --help (usage on stdout, exit 0),
// else run `body` and report its Status (exit 0 or 1).
int parse_and_run(ArgParser& p, std::string_view command, std::span<const std::string_view> args,
                  const std::function<Status(const ArgParser&)>& body);

}  // namespace minfer::cli
