#include "cli/args.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/utf8.h"

namespace minfer::cli {
namespace {

std::vector<std::string> split_names(std::string_view names) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string_view::npos) comma = names.size();
    out.emplace_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

ArgParser::ArgParser(std::string command, std::string synopsis)
    : command_(std::move(command)), synopsis_(std::move(synopsis)) {}

void ArgParser::option(std::string_view names, std::string_view value_name, std::string_view help) {
  specs_.push_back({split_names(names), std::string(value_name), std::string(help)});
}

void ArgParser::flag(std::string_view names, std::string_view help) {
  specs_.push_back({split_names(names), "", std::string(help)});
}

const ArgParser::Spec* ArgParser::find(std::string_view name) const {
  for (const auto& s : specs_) {
    for (const auto& n : s.names) {
      if (n == name) return &s;
    }
  }
  return nullptr;
}

void ArgParser::positional(std::string_view name, size_t max_count) {
  positional_name_ = std::string(name);
  max_positional_ = max_count;
}

Status ArgParser::add_positional(std::string_view arg, bool after_dashes) {
  if (positional_.size() >= max_positional_) {
    std::string why = max_positional_ == 0 ? "takes no positional arguments"
                                           : "takes at most " + std::to_string(max_positional_) +
                                                 " " + positional_name_ + " argument(s)";
    return Status::invalid_argument("unexpected argument '" + std::string(arg) + "'" +
                                    (after_dashes ? " after '--'" : "") + ": '" + command_ + "' " +
                                    why);
  }
  positional_.emplace_back(arg);
  return Status::ok();
}

Status ArgParser::parse(std::span<const std::string_view> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--") {  // the rest is positional, even what starts with '-'
      for (size_t k = i + 1; k < args.size(); ++k) {
        MINFER_RETURN_IF_ERROR(add_positional(args[k], /*after_dashes=*/true));
      }
      break;
    }
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      MINFER_RETURN_IF_ERROR(add_positional(a, /*after_dashes=*/false));
      continue;
    }
    std::string_view name = a, inline_value;
    bool has_inline = false;
    if (size_t eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    const Spec* spec = find(name);
    if (spec == nullptr)
      return Status::invalid_argument("unknown option '" + std::string(name) + "'");
    const std::string& key = spec->names.back();
    if (spec->value_name.empty()) {
      if (has_inline)
        return Status::invalid_argument("option '" + std::string(name) + "' takes no value");
      values_[key] = {"1", std::string(name)};
      continue;
    }
    if (has_inline) {
      values_[key] = {std::string(inline_value), std::string(name)};
    } else if (i + 1 < args.size()) {
      values_[key] = {std::string(args[++i]), std::string(name)};
    } else {
      return Status::invalid_argument("option '" + std::string(name) + "' needs a value (" +
                                      spec->value_name + ")");
    }
  }
  return Status::ok();
}

std::string ArgParser::usage() const {
  std::ostringstream out;
  out << "usage: minfer " << command_ << " " << synopsis_ << "\n\noptions:\n";
  for (const auto& s : specs_) {
    std::string names;
    for (const auto& n : s.names) names += (names.empty() ? "" : ", ") + n;
    if (!s.value_name.empty()) names += " " + s.value_name;
    out << "  " << names;
    for (size_t pad = names.size(); pad < 28; ++pad) out << ' ';
    out << " " << s.help << "\n";
  }
  return out.str();
}

const ArgParser::Given* ArgParser::given(std::string_view name) const {
  const Spec* s = find(name);
  if (s == nullptr) return nullptr;
  auto it = values_.find(s->names.back());
  return it == values_.end() ? nullptr : &it->second;
}

bool ArgParser::has(std::string_view name) const {
  return given(name) != nullptr;
}

std::optional<std::string> ArgParser::get(std::string_view name) const {
  const Given* g = given(name);
  if (g == nullptr) return std::nullopt;
  return g->value;
}

std::string ArgParser::get_or(std::string_view name, std::string fallback) const {
  auto v = get(name);
  return v ? *v : std::move(fallback);
}

std::string ArgParser::spelled(std::string_view name) const {
  const Given* g = given(name);
  if (g == nullptr) return std::string(name);
  return g->spelling + " " + g->value;
}

Result<int64_t> ArgParser::get_int(std::string_view name, int64_t fallback, int64_t min,
                                   int64_t max) const {
  const Given* g = given(name);
  if (g == nullptr) return fallback;
  const std::string& v = g->value;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  const bool whole = end == v.data() + v.size() && !v.empty();
  if (ec == std::errc::invalid_argument || !whole) {
    return Status::invalid_argument("option '" + g->spelling + "': '" + v + "' is not an integer");
  }
  if (ec == std::errc::result_out_of_range || out < min || out > max) {
    return Status::invalid_argument("option '" + g->spelling + "': " + v + " is out of range (" +
                                    std::to_string(min) + " to " + std::to_string(max) + ")");
  }
  return out;
}

Result<double> ArgParser::get_double(std::string_view name, double fallback, double min,
                                     double max) const {
  const Given* g = given(name);
  if (g == nullptr) return fallback;
  const std::string& v = g->value;
  double out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(out)) {
    return Status::invalid_argument("option '" + g->spelling + "': '" + v +
                                    "' is not a finite number");
  }
  if (out < min || out > max) {
    std::ostringstream range;
    range << min << " to " << max;
    return Status::invalid_argument("option '" + g->spelling + "': " + v + " is out of range (" +
                                    range.str() + ")");
  }
  return out;
}

Result<uint64_t> ArgParser::get_u64(std::string_view name, uint64_t fallback) const {
  const Given* g = given(name);
  if (g == nullptr) return fallback;
  const std::string& v = g->value;
  uint64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range) {
    return Status::invalid_argument("option '" + g->spelling + "': " + v +
                                    " is out of range (0 to 18446744073709551615)");
  }
  if (ec != std::errc() || end != v.data() + v.size()) {
    return Status::invalid_argument("option '" + g->spelling + "': '" + v +
                                    "' is not a non-negative integer");
  }
  return out;
}

int report(std::string_view command, const Status& status, int error_code) {
  if (status.is_ok()) return 0;
  std::fprintf(stderr, "minfer %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               printable_text(status.message()).c_str());
  return error_code;
}

std::optional<int> parse_command_line(ArgParser& p, std::string_view command,
                                      std::span<const std::string_view> args) {
  if (Status s = p.parse(args); !s) {
    std::fprintf(stderr, "minfer %.*s: %s\n\n%s", static_cast<int>(command.size()), command.data(),
                 printable_text(s.message()).c_str(), p.usage().c_str());
    return 2;
  }
  if (p.help_requested()) {
    std::printf("%s", p.usage().c_str());
    return 0;
  }
  return std::nullopt;
}

int parse_and_run(ArgParser& p, std::string_view command, std::span<const std::string_view> args,
                  const std::function<Status(const ArgParser&)>& body) {
  if (auto exit_code = parse_command_line(p, command, args)) return *exit_code;
  return report(command, body(p));
}

}  // namespace minfer::cli
