// Options: every MINFER_* environment variable, read in one place by one
// rule into typed structs that are passed down to what uses them.
//
// The engine-wide switches (fusions, observability, command-line defaults)
// are Options' own fields. Each backend declares its own switches as a
// section: a plain struct with defaults and a table of {variable, help,
// field} rows (OptionField), in a header-only backend/<kind>/<kind>_options.h
// so that a build without that backend still lists them. The backend
// registry gathers the sections (backend::option_sections()); the reader
// takes them as an argument, so base/ names no backend.
//
// Contract:
//   - parse() reads through any lookup function (tests pass a map);
//     from_env() reads the process environment once per call. Both read
//     Options' own rows and those of every section passed, and return an
//     error naming the variable, its value and what it accepts, for any
//     value that is not valid: nothing is silently taken as a default.
//   - Flags accept 1/true/yes/on and 0/false/no/off (any case); unset or
//     empty means the default. Numbers must parse whole and be in range.
//   - Defaults are the engine's defaults: Options{} is what an empty
//     environment gives, and section<S>() of an Options that holds no S
//     gives S{}.
//   - Who reads it: the CLI calls from_env(backend::option_sections()) once
//     at startup and passes the result down (SessionOptions::options, and
//     from there the backends, the fusion pass and the executor); a backend
//     reads its switches with options.section<S>(). Choices that are
//     process-wide by nature (the CPU's SIMD level, the CUDA device and PDL,
//     made once at first use) read process_section<S>() (or
//     process_options() for Options' own fields), the environment taken once.
//   - option_variables(sections) lists every variable with its meaning, for
//     --help texts and the README check.
// Threading: plain values; process_options() and process_section<S>() are
// initialized thread-safely.
#pragma once

#include <any>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

namespace minfer {

struct OptionVariable {
  std::string_view name;
  std::string_view help;
};

// How a variable's value reaches a field of section S.
// (The member pointers are named through aliases: GCC 12 warns about a
// declarator `int S::*field` in a template, -Wparentheses.)
template <class S>
struct IntOption {  // a whole number in [min, max]
  using Field = int S::*;
  Field field;
  int min, max;
};
template <class S>
struct SecondsOption {  // seconds above 0, at most a day
  using Field = double S::*;
  Field field;
};
template <class S>
struct OptionField {
  OptionVariable var;
  std::variant<bool S::*, std::string S::*, IntOption<S>, SecondsOption<S>> field;
};

// The one parsing rule, for each kind of field.
namespace option_rule {
Status set_flag(bool& out, std::string_view name, std::string_view value);
Status set_int(int& out, int min, int max, std::string_view name, std::string_view value);
Status set_seconds(double& out, std::string_view name, std::string_view value);
// Out of line: inlined into parse_section of a section without text fields,
// GCC 12 reports the never-taken string assignment as out of bounds.
Status set_text(std::string& out, std::string_view value);
}  // namespace option_rule

using OptionLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Reads section S's rows (S::fields()) through lookup into an S.
template <class S>
Result<S> parse_section(const OptionLookup& lookup) {
  S s;
  for (const OptionField<S>& row : S::fields()) {
    const std::optional<std::string> value = lookup(row.var.name);
    if (!value || value->empty()) continue;
    const std::string_view name = row.var.name;
    const Status status = std::visit(
        [&](const auto& f) -> Status {
          using F = std::decay_t<decltype(f)>;
          if constexpr (std::is_same_v<F, bool S::*>) {
            return option_rule::set_flag(s.*f, name, *value);
          } else if constexpr (std::is_same_v<F, std::string S::*>) {
            return option_rule::set_text(s.*f, *value);
          } else if constexpr (std::is_same_v<F, IntOption<S>>) {
            return option_rule::set_int(s.*(f.field), f.min, f.max, name, *value);
          } else {
            return option_rule::set_seconds(s.*(f.field), name, *value);
          }
        },
        row.field);
    MINFER_RETURN_IF_ERROR(status);
  }
  return s;
}

// One backend's section, type-erased for the reader: its variables and how
// to read it (into a std::any holding an S).
struct OptionSection {
  std::span<const OptionVariable> (*variables)();
  Result<std::any> (*parse)(const OptionLookup& lookup);
};

// The descriptor of section S, which has `static std::span<const
// OptionField<S>> fields()` and default member values.
template <class S>
const OptionSection* option_section() {
  static const OptionSection section{[] {
                                       static const std::vector<OptionVariable> vars = [] {
                                         std::vector<OptionVariable> out;
                                         for (const OptionField<S>& row : S::fields())
                                           out.push_back(row.var);
                                         return out;
                                       }();
                                       return std::span<const OptionVariable>(vars);
                                     },
                                     [](const OptionLookup& lookup) -> Result<std::any> {
                                       MINFER_ASSIGN_OR_RETURN(S s, parse_section<S>(lookup));
                                       return std::any(std::move(s));
                                     }};
  return &section;
}

using OptionSections = std::span<const OptionSection* const>;

struct Options {
  // MINFER_BATCH_INVARIANT (on): the engine's batches compute every token
  // with arithmetic that does not depend on the rest of the batch.
  bool batch_invariant = true;
  // Fusions (each off for A/B comparisons).
  bool no_fuse_glu = false;       // MINFER_NO_FUSE_GLU
  bool no_fuse_qkv = false;       // MINFER_NO_FUSE_QKV
  bool no_fuse_qkv_norm = false;  // MINFER_NO_FUSE_QKV_NORM
  bool no_fuse_ffn = false;       // MINFER_NO_FUSE_FFN
  bool no_fuse_add = false;       // MINFER_NO_FUSE_ADD
  bool no_fuse_norm = false;      // MINFER_NO_FUSE_NORM
  // Observability.
  bool graph_trace = false;  // MINFER_GRAPH_TRACE: log each new plan
  bool op_profile = false;   // MINFER_OP_PROFILE: per-op time tables
  std::string trace_dir;     // MINFER_TRACE: dump every node's output there
  // Defaults for command-line settings (the flags beat them).
  std::string cache_type;           // MINFER_CACHE_TYPE: K and V cache type ("" = f16)
  std::string qwen2_tokenizer_dir;  // MINFER_QWEN2_TOKENIZER: for `minfer synth`

  // Options' own rows.
  static std::span<const OptionField<Options>> fields();

  // The section of type S: the one read or set, else S{}.
  template <class S>
  const S& section() const {
    for (const std::any& s : sections_) {
      if (const S* p = std::any_cast<S>(&s)) return *p;
    }
    static const S kDefaults{};
    return kDefaults;
  }
  // The section of type S to set (tests, callers that override a switch);
  // added with its defaults when absent.
  template <class S>
  S& section() {
    for (std::any& s : sections_) {
      if (S* p = std::any_cast<S>(&s)) return *p;
    }
    return sections_.emplace_back(S{}).template emplace<S>();
  }

  using Lookup = OptionLookup;
  static Result<Options> parse(const Lookup& lookup, OptionSections sections = {});
  static Result<Options> from_env(OptionSections sections = {});

 private:
  std::vector<std::any> sections_;
};

// Options' own variables, then every section's, in order.
std::vector<OptionVariable> option_variables(OptionSections sections = {});

// The process environment as a lookup.
std::optional<std::string> env_lookup(std::string_view name);

// The environment taken once, for the process-wide choices named above. An
// invalid environment gives the defaults here; the CLI has refused it first.
const Options& process_options();
template <class S>
const S& process_section() {
  static const S s = [] {
    auto r = parse_section<S>(env_lookup);
    return r ? *r : S{};
  }();
  return s;
}

}  // namespace minfer
