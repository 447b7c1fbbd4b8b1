#include "cli/bench_output.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "base/json.h"
#include "cli/output.h"

namespace minfer::cli {
namespace {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Sample standard deviation (n - 1), 0 for fewer than two samples.
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::vector<double> samples_ns(const BenchRecord& r) {
  return std::vector<double>(r.samples_ns.begin(), r.samples_ns.end());
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string integer(int64_t v) {
  return std::to_string(v);
}

// One field of the json, jsonl and csv formats: its name, whether json
// quotes it, and its value (nullopt: the test has none).
struct Field {
  std::string_view name;
  bool quoted;
  std::optional<std::string> (*value)(const BenchRecord&);
};

using Value = std::optional<std::string>;
const Field kFields[] = {
    {"backends", true, [](const BenchRecord& r) -> Value { return r.backends; }},
    {"model_filename", true, [](const BenchRecord& r) -> Value { return r.model_filename; }},
    {"model_type", true, [](const BenchRecord& r) -> Value { return r.model_type; }},
    {"model_size", false,
     [](const BenchRecord& r) -> Value { return std::to_string(r.model_size); }},
    {"model_n_params", false,
     [](const BenchRecord& r) -> Value { return integer(r.model_n_params); }},
    {"n_batch", false, [](const BenchRecord& r) -> Value { return integer(r.n_batch); }},
    {"n_threads", false, [](const BenchRecord& r) -> Value { return integer(r.n_threads); }},
    {"type_k", true, [](const BenchRecord& r) -> Value { return r.type_k; }},
    {"type_v", true, [](const BenchRecord& r) -> Value { return r.type_v; }},
    {"n_prompt", false, [](const BenchRecord& r) -> Value { return integer(r.n_prompt); }},
    {"n_gen", false, [](const BenchRecord& r) -> Value { return integer(r.n_gen); }},
    {"n_depth", false, [](const BenchRecord& r) -> Value { return integer(r.n_depth); }},
    {"test_time", true, [](const BenchRecord& r) -> Value { return r.test_time; }},
    {"avg_ns", false,
     [](const BenchRecord& r) -> Value { return format("%.0f", mean(samples_ns(r))); }},
    {"stddev_ns", false,
     [](const BenchRecord& r) -> Value { return format("%.0f", stddev(samples_ns(r))); }},
    {"avg_ts", false,
     [](const BenchRecord& r) -> Value { return format("%.6f", mean(r.samples_ts())); }},
    {"stddev_ts", false,
     [](const BenchRecord& r) -> Value { return format("%.6f", stddev(r.samples_ts())); }},
    // Ours, after llama-bench's.
    {"roofline_fraction", false,
     [](const BenchRecord& r) -> Value {
       if (!r.roofline_fraction) return std::nullopt;
       return format("%.4f", *r.roofline_fraction);
     }},
    {"read_bandwidth_gbs", false,
     [](const BenchRecord& r) -> Value {
       if (!r.bandwidth) return std::nullopt;
       return format("%.3f", r.bandwidth->gbs);
     }},
    {"bandwidth_source", true,
     [](const BenchRecord& r) -> Value {
       if (!r.bandwidth) return std::nullopt;
       return r.bandwidth->source;
     }},
    {"decode_weight_bytes", false,
     [](const BenchRecord& r) -> Value { return std::to_string(r.decode_weight_bytes); }},
};

// The fields of one record as json members ("name": value, ...), samples last.
std::string json_members(const BenchRecord& r, std::string_view separator) {
  std::string out;
  for (const Field& f : kFields) {
    const Value v = f.value(r);
    if (!v) continue;
    out += json_quote(f.name) + ": " + (f.quoted ? json_quote(*v) : *v);
    out += separator;
  }
  std::string ns, ts;
  for (uint64_t s : r.samples_ns) ns += (ns.empty() ? "" : ", ") + std::to_string(s);
  for (double s : r.samples_ts()) ts += (ts.empty() ? "" : ", ") + format("%.6f", s);
  return out + "\"samples_ns\": [" + ns + "]" + std::string(separator) + "\"samples_ts\": [" + ts +
         "]";
}

class JsonPrinter final : public BenchPrinter {
 public:
  Status begin() override { return write_stdout("["); }
  Status record(const BenchRecord& r) override {
    const std::string lead = first_ ? "\n" : ",\n";
    first_ = false;
    return write_stdout(lead + "  {\n    " + json_members(r, ",\n    ") + "\n  }");
  }
  Status end() override { return write_stdout(first_ ? "]\n" : "\n]\n"); }

 private:
  bool first_ = true;
};

class JsonlPrinter final : public BenchPrinter {
 public:
  Status record(const BenchRecord& r) override {
    return write_stdout("{" + json_members(r, ", ") + "}\n");
  }
};

// Every value quoted, quotes doubled (RFC 4180), as llama-bench writes it.
std::string csv_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

class CsvPrinter final : public BenchPrinter {
 public:
  Status begin() override {
    std::string header;
    for (const Field& f : kFields) header += (header.empty() ? "" : ",") + std::string(f.name);
    return write_stdout(header + "\n");
  }
  Status record(const BenchRecord& r) override {
    std::string row;
    for (const Field& f : kFields) {
      if (!row.empty()) row += ",";
      row += csv_quote(f.value(r).value_or(""));
    }
    return write_stdout(row + "\n");
  }
};

// llama-bench's table: a negative width aligns left; the roofline is ours.
struct Column {
  std::string_view title;
  int width;
};

class MarkdownPrinter final : public BenchPrinter {
 public:
  explicit MarkdownPrinter(bool show_batch) {
    columns_ = {{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"threads", 7}};
    if (show_batch) columns_.push_back({"n_batch", 7});
    columns_.insert(columns_.end(), {{"test", 15}, {"t/s", 20}, {"roofline", 8}});
  }
  Status begin() override;
  Status record(const BenchRecord& r) override;
  Status end() override;

 private:
  std::string cell(const BenchRecord& r, std::string_view title) const;

  std::vector<Column> columns_;
  std::vector<Bandwidth> bandwidths_;  // distinct, in order of first use
  uint64_t decode_weight_bytes_ = 0;
};

Status MarkdownPrinter::begin() {
  std::string titles = "|", rule = "|";
  for (const Column& c : columns_) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %*s |", c.width, std::string(c.title).c_str());
    titles += buf;
    rule += " " + std::string(static_cast<size_t>(std::abs(c.width) - 1), '-') +
            (c.width > 0 ? ":" : "-") + " |";
  }
  return write_stdout(titles + "\n" + rule + "\n");
}

std::string MarkdownPrinter::cell(const BenchRecord& r, std::string_view title) const {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
  const auto bytes = static_cast<double>(r.model_size);
  const auto params = static_cast<double>(r.model_n_params);
  if (title == "model") return r.model_type;
  if (title == "size")
    return bytes < kGiB ? format("%.2f MiB", bytes / kMiB) : format("%.2f GiB", bytes / kGiB);
  if (title == "params")
    return params < 1e9 ? format("%.2f M", params / 1e6) : format("%.2f B", params / 1e9);
  if (title == "backend") return r.backends;
  if (title == "threads") return integer(r.n_threads);
  if (title == "n_batch") return integer(r.n_batch);
  if (title == "test") return r.test_name();
  if (title == "t/s") {
    const std::vector<double> ts = r.samples_ts();
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f ± %.2f", mean(ts), stddev(ts));
    return buf;
  }
  if (title == "roofline" && r.roofline_fraction)
    return format("%.1f%%", 100.0 * *r.roofline_fraction);
  return "";
}

Status MarkdownPrinter::record(const BenchRecord& r) {
  std::string line = "|";
  for (const Column& c : columns_) {
    // "±" is two bytes but one column: one more byte of padding.
    const int width = c.title == "t/s" ? c.width + 1 : c.width;
    char buf[160];
    std::snprintf(buf, sizeof(buf), " %*s |", width, cell(r, c.title).c_str());
    line += buf;
  }
  if (r.bandwidth) {
    bool seen = false;
    for (const Bandwidth& b : bandwidths_)
      seen |= b.gbs == r.bandwidth->gbs && b.source == r.bandwidth->source;
    if (!seen) bandwidths_.push_back(*r.bandwidth);
  }
  decode_weight_bytes_ = r.decode_weight_bytes;
  return write_stdout(line + "\n");
}

Status MarkdownPrinter::end() {
  std::string out;
  for (const Bandwidth& b : bandwidths_) {
    out += "roofline bandwidth: " + format("%.2f GB/s", b.gbs) + ", " + b.source + "\n";
  }
  if (!bandwidths_.empty()) {
    out = "\n" + out + "weights read per decoded token: " +
          format("%.1f MB", static_cast<double>(decode_weight_bytes_) / 1e6) + "\n";
  }
  return out.empty() ? Status::ok() : write_stdout(out);
}

}  // namespace

std::string BenchRecord::test_name() const {
  std::string name;
  if (n_prompt > 0) name = "pp" + std::to_string(n_prompt);
  if (n_gen > 0) name += (name.empty() ? "tg" : "+tg") + std::to_string(n_gen);
  if (n_depth > 0) name += " @ d" + std::to_string(n_depth);
  return name;
}

std::vector<double> BenchRecord::samples_ts() const {
  std::vector<double> ts;
  const auto tokens = static_cast<double>(n_prompt + n_gen);
  for (uint64_t ns : samples_ns)
    ts.push_back(ns > 0 ? tokens * 1e9 / static_cast<double>(ns) : 0.0);
  return ts;
}

Result<BenchFormat> parse_bench_format(std::string_view context, std::string_view name) {
  struct Named {
    std::string_view name;
    BenchFormat format;
  };
  static constexpr Named kFormats[] = {{"md", BenchFormat::kMarkdown},
                                       {"json", BenchFormat::kJson},
                                       {"jsonl", BenchFormat::kJsonl},
                                       {"csv", BenchFormat::kCsv}};
  for (const Named& f : kFormats) {
    if (f.name == name) return f.format;
  }
  return Status::invalid_argument(std::string(context) +
                                  ": unknown output format (md, json, jsonl, csv)");
}

std::unique_ptr<BenchPrinter> make_bench_printer(BenchFormat format, bool show_batch) {
  switch (format) {
    case BenchFormat::kJson:
      return std::make_unique<JsonPrinter>();
    case BenchFormat::kJsonl:
      return std::make_unique<JsonlPrinter>();
    case BenchFormat::kCsv:
      return std::make_unique<CsvPrinter>();
    case BenchFormat::kMarkdown:
      break;
  }
  return std::make_unique<MarkdownPrinter>(show_batch);
}

}  // namespace minfer::cli
