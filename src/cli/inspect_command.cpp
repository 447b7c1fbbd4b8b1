// `minfer inspect FILE [--json]`: a GGUF file's metadata, tensor table and totals.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "base/json.h"
#include "base/utf8.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "gguf/file.h"

namespace minfer::cli {
namespace {

// GGUF strings are bytes; json_quote turns ill-formed UTF-8 into U+FFFD.
std::string json_string(std::string_view s) {
  return json_quote(s);
}

std::string json_scalar(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type()) {
    case ValueType::STRING:
      return json_string(v.to_string().value());
    case ValueType::BOOL:
      return v.to_bool().value() ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: {
      const double d = v.to_f64().value();
      if (!std::isfinite(d)) return json_string(std::to_string(d));
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", d);
      return buf;
    }
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return std::to_string(v.to_i64().value());
    default:
      return std::to_string(v.to_u64().value());
  }
}

// Arrays are cut to `max_items` unless max_items is 0; "count" always says the full size.
std::string json_value(const gguf::Value& v, size_t max_items) {
  if (v.type() != gguf::ValueType::ARRAY) return json_scalar(v);
  std::string out = "[";
  const auto& items = v.array();
  const size_t n = max_items == 0 ? items.size() : std::min(items.size(), max_items);
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += json_value(items[i], max_items);
  }
  return out + "]";
}

std::string type_label(const gguf::Value& v) {
  std::string t(gguf::value_type_name(v.type()));
  if (v.type() == gguf::ValueType::ARRAY) {
    t += "[" + std::string(gguf::value_type_name(v.array_type())) + "]";
  }
  return t;
}

std::string shape_string(const std::vector<int64_t>& dims, const char* sep) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? sep : "") + std::to_string(dims[i]);
  return s;
}

struct TypeTotal {
  size_t tensors = 0;
  uint64_t bytes = 0;
  int64_t elements = 0;
};

std::map<std::string, TypeTotal> totals_by_type(const gguf::File& f) {
  std::map<std::string, TypeTotal> by_type;
  for (const auto& t : f.tensors()) {
    auto& tt = by_type[std::string(quant::type_name(t.type))];
    tt.tensors++;
    tt.bytes += t.nbytes;
    tt.elements += t.n_elements();
  }
  return by_type;
}

void print_text(const gguf::File& f) {
  std::printf("GGUF v%u, %zu part(s), alignment %" PRIu64 "\n", f.version(), f.n_parts(),
              f.alignment());
  for (const auto& p : f.paths()) std::printf("  %s\n", printable_text(p).c_str());
  std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) {
    std::printf("  %-44s %-14s %s\n", printable_text(key).c_str(), type_label(value).c_str(),
                value.display().c_str());
  }
  std::printf("\ntensors (%zu):\n  %-36s %-7s %-18s %5s %14s %14s\n", f.tensors().size(), "name",
              "type", "shape", "part", "offset", "bytes");
  int64_t params = 0;
  for (const auto& t : f.tensors()) {
    std::printf("  %-36s %-7s %-18s %5u %14" PRIu64 " %14" PRIu64 "\n",
                printable_text(t.name).c_str(), std::string(quant::type_name(t.type)).c_str(),
                shape_string(t.dims, " x ").c_str(), t.part + 1, t.offset, t.nbytes);
    params += t.n_elements();
  }
  std::printf("\ntotals: %zu tensors, %" PRId64 " parameters, %" PRIu64 " bytes (%.2f MiB)\n",
              f.tensors().size(), params, f.total_tensor_bytes(),
              static_cast<double>(f.total_tensor_bytes()) / (1024.0 * 1024.0));
  for (const auto& [name, tt] : totals_by_type(f)) {
    std::printf("  %-7s %5zu tensors %14" PRId64 " parameters %14" PRIu64 " bytes\n", name.c_str(),
                tt.tensors, tt.elements, tt.bytes);
  }
}

void print_json(const gguf::File& f, size_t max_items) {
  std::printf("{\n  \"version\": %u,\n  \"alignment\": %" PRIu64 ",\n  \"parts\": [", f.version(),
              f.alignment());
  for (size_t i = 0; i < f.paths().size(); ++i) {
    std::printf("%s%s", i ? ", " : "", json_string(f.paths()[i]).c_str());
  }
  std::printf("],\n  \"metadata\": [\n");
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const auto& [key, value] = f.metadata()[i];
    std::printf("    {\"key\": %s, \"type\": %s, ", json_string(key).c_str(),
                json_string(type_label(value)).c_str());
    if (value.type() == gguf::ValueType::ARRAY) std::printf("\"count\": %zu, ", value.array_size());
    std::printf("\"value\": %s}%s\n", json_value(value, max_items).c_str(),
                i + 1 < f.metadata().size() ? "," : "");
  }
  std::printf("  ],\n  \"tensors\": [\n");
  int64_t params = 0;
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& t = f.tensors()[i];
    params += t.n_elements();
    std::printf(
        "    {\"name\": %s, \"type\": \"%s\", \"shape\": [%s], \"part\": %u, "
        "\"offset\": %" PRIu64 ", \"file_offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}%s\n",
        json_string(t.name).c_str(), std::string(quant::type_name(t.type)).c_str(),
        shape_string(t.dims, ", ").c_str(), t.part, t.offset, t.file_offset, t.nbytes,
        i + 1 < f.tensors().size() ? "," : "");
  }
  std::printf("  ],\n  \"totals\": {\"tensors\": %zu, \"parameters\": %" PRId64
              ", \"bytes\": %" PRIu64 ", \"by_type\": {",
              f.tensors().size(), params, f.total_tensor_bytes());
  bool first = true;
  for (const auto& [name, tt] : totals_by_type(f)) {
    std::printf("%s\"%s\": {\"tensors\": %zu, \"parameters\": %" PRId64 ", \"bytes\": %" PRIu64 "}",
                first ? "" : ", ", name.c_str(), tt.tensors, tt.elements, tt.bytes);
    first = false;
  }
  std::printf("}}\n}\n");
}

}  // namespace

int run_inspect(std::span<const std::string_view> args) {
  ArgParser p("inspect", "FILE.gguf [--json] [--full]");
  p.flag("--json", "machine-readable output");
  p.flag("--full", "print metadata arrays whole (JSON) instead of their first items");
  p.positional("FILE", 1);
  if (auto exit_code = parse_command_line(p, "inspect", args)) return *exit_code;
  if (p.positional().empty()) {
    std::fprintf(stderr, "minfer inspect: no FILE given\n\n%s", p.usage().c_str());
    return 2;
  }
  auto file = gguf::File::open(p.positional()[0]);
  if (!file) return report("inspect", file.status());
  if (p.has("--json")) {
    print_json(**file, p.has("--full") ? 0 : 16);
  } else {
    print_text(**file);
  }
  return 0;
}

}  // namespace minfer::cli
