#include "cli/args.h"

#include <charconv>
#include <cstdio>
#include <sstream>

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

Status ArgParser::parse(std::span<const std::string_view> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || a == "--") {
      positional_.emplace_back(a);
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
    if (spec == nullptr) return Status::error("unknown option '" + std::string(name) + "'");
    const std::string& key = spec->names.back();
    if (spec->value_name.empty()) {
      if (has_inline) return Status::error("option '" + std::string(name) + "' takes no value");
      values_[key] = "1";
      continue;
    }
    if (has_inline) {
      values_[key] = std::string(inline_value);
    } else if (i + 1 < args.size()) {
      values_[key] = std::string(args[++i]);
    } else {
      return Status::error("option '" + std::string(name) + "' needs a value (" + spec->value_name +
                           ")");
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

bool ArgParser::has(std::string_view name) const {
  const Spec* s = find(name);
  return s != nullptr && values_.count(s->names.back()) > 0;
}

std::optional<std::string> ArgParser::get(std::string_view name) const {
  const Spec* s = find(name);
  if (s == nullptr) return std::nullopt;
  auto it = values_.find(s->names.back());
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ArgParser::get_or(std::string_view name, std::string fallback) const {
  auto v = get(name);
  return v ? *v : std::move(fallback);
}

Result<int64_t> ArgParser::get_int(std::string_view name, int64_t fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) {
    return Status::error("option '" + std::string(name) + "': '" + *v + "' is not an integer");
  }
  return out;
}

Result<double> ArgParser::get_double(std::string_view name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  double out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) {
    return Status::error("option '" + std::string(name) + "': '" + *v + "' is not a number");
  }
  return out;
}

int report(std::string_view command, const Status& status, int error_code) {
  if (status.is_ok()) return 0;
  std::fprintf(stderr, "minfer %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               status.message().c_str());
  return error_code;
}

int parse_and_run(ArgParser& p, std::string_view command, std::span<const std::string_view> args,
                  const std::function<Status(const ArgParser&)>& body) {
  if (Status s = p.parse(args); !s) {
    std::fprintf(stderr, "minfer %.*s: %s\n\n%s", static_cast<int>(command.size()), command.data(),
                 s.message().c_str(), p.usage().c_str());
    return 2;
  }
  if (p.help_requested()) {
    std::printf("%s", p.usage().c_str());
    return 0;
  }
  return report(command, body(p));
}

}  // namespace minfer::cli
