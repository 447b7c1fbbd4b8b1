// The results of `minfer bench`, one record per test, and the four formats
// that print them with llama-bench's names: md (its table), json (a list of
// objects), jsonl (one object per line) and csv (a header row, then one row
// per test).
//
// Contract: a BenchPrinter prints begin() once, then record() for each test
// as it completes (rows appear while later tests run), then end(). Every
// write goes through write_stdout(), so a failed write is an error at once.
// Field names and order follow llama-bench's, for the fields we have
// (backends, model_filename, model_type, model_size, model_n_params, n_batch,
// n_threads, type_k, type_v, n_prompt, n_gen, n_depth, test_time, avg_ns,
// stddev_ns, avg_ts, stddev_ts; json and jsonl add samples_ns and
// samples_ts); ours follow them: roofline_fraction, read_bandwidth_gbs,
// bandwidth_source (tg tests only: absent from json, empty in csv otherwise)
// and decode_weight_bytes. t/s counts n_prompt + n_gen tokens per sample, not
// the depth, as llama-bench does.
// Threading: the command's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace minfer::cli {

enum class BenchFormat { kMarkdown, kJson, kJsonl, kCsv };

// "md", "json", "jsonl" or "csv"; an error names `context` and the allowed names.
Result<BenchFormat> parse_bench_format(std::string_view context, std::string_view name);

// The memory bandwidth a roofline divides by, and where it came from.
struct Bandwidth {
  double gbs = 0;
  std::string source;  // "given (--bandwidth)", "measured (best of 5)", ...
};

struct BenchRecord {
  std::string model_filename, model_type, backends;
  uint64_t model_size = 0;  // bytes of every tensor
  int64_t model_n_params = 0;
  int64_t n_batch = 0;
  int n_threads = 0;
  std::string type_k, type_v;  // KV cache types: "f16", "q8_0", "f32"
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string test_time;               // RFC 3339, UTC, when the test started
  std::vector<uint64_t> samples_ns;    // one per timed repetition
  uint64_t decode_weight_bytes = 0;    // matrix bytes one decoded token reads
  std::optional<Bandwidth> bandwidth;  // tg tests: the roofline's denominator
  std::optional<double> roofline_fraction;

  // llama-bench's test name: "pp512", "tg128", "pp512+tg128", "pp512 @ d1024".
  std::string test_name() const;
  std::vector<double> samples_ts() const;
};

class BenchPrinter {
 public:
  virtual ~BenchPrinter() = default;
  virtual Status begin() { return Status::ok(); }
  virtual Status record(const BenchRecord& r) = 0;
  virtual Status end() { return Status::ok(); }
};

// `show_batch`: the md table gets an n_batch column (llama-bench shows one
// when -b is given).
std::unique_ptr<BenchPrinter> make_bench_printer(BenchFormat format, bool show_batch);

}  // namespace minfer::cli
