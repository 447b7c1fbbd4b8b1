// `minfer bench`: prompt processing (pp) and generation (tg) speed with
// llama-bench's definitions and options, plus the decode roofline fraction.
//   pp: one batch of n_prompt tokens; t/s = n_prompt / time.
//   tg: n_gen tokens evaluated one at a time; t/s = n_gen / time.
//   pg (-pg P,N): pp then tg in one timed run; t/s = (P + N) / time.
// -p, -n, -d, -t and -b take lists and ranges (cli/value_list.h); the tests
// are every combination, in llama-bench's order: for each n_batch, each
// n_threads, each depth, the pp tests, then the tg tests, then the pg test.
// Each test gets a fresh one-slot engine (runtime/engine.h, batch invariance
// and step-shape buckets off) whose sequences hold depth + n_prompt + n_gen
// tokens (llama-bench's n_ctx; -c overrides), a context of `depth` tokens
// evaluated untimed, one untimed warm-up run (--no-warmup skips it), then -r
// timed runs. A run is one request: the context, whose cached pages it reuses
// (as llama-bench restores its saved state; the KV pages are made small
// enough to divide the depth), then the prompt, which
// it never reuses, then greedy tokens to the count whatever they are (end-
// of-generation tokens do not stop it). Results stream as each test ends.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/bandwidth.h"
#include "base/thread_pool.h"
#include "cli/bench_output.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/value_list.h"
#include "model/file_type.h"
#include "runtime/generate.h"

namespace minfer::cli {
namespace {

// The host bandwidth: the best of kHostProbes probes of two passes over 256
// MiB (8x a large L3), kProbeGap apart. One probe of back-to-back passes made
// the printed roofline of the same 0.5B Q4_0 tg swing 35-66 % between runs on
// the shared 2-vCPU host of docs/PERFORMANCE.md, whose probe reads 36 or 58
// GB/s by the moment; spread probes sample more than one moment (that section,
// "How minfer bench measures", says what this does and does not fix).
constexpr int kHostProbes = 5;
constexpr size_t kProbeBytes = size_t{256} << 20;
constexpr auto kProbeGap = std::chrono::milliseconds(100);

struct BenchOptions {
  std::vector<int64_t> n_prompt{512}, n_gen{128}, n_depth{0};
  std::vector<int64_t> n_batch;    // empty: max(512, n_prompt) per test
  std::vector<int64_t> n_threads;  // 0: every hardware thread
  std::optional<std::pair<int64_t, int64_t>> pg;
  int64_t reps = 5;
  int64_t delay_s = 0;
  bool warmup = true;
  BenchFormat format = BenchFormat::kMarkdown;
  double bandwidth_gbs = 0;  // 0: measure
};

struct TestSpec {
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0, n_batch = 0;
  int n_threads = 0;
  std::string name() const {
    BenchRecord r;
    r.n_prompt = n_prompt, r.n_gen = n_gen, r.n_depth = n_depth;
    return r.test_name();
  }
};

std::vector<TestSpec> test_matrix(const BenchOptions& o) {
  const std::vector<int64_t> batches = o.n_batch.empty() ? std::vector<int64_t>{0} : o.n_batch;
  std::vector<TestSpec> tests;
  for (int64_t b : batches) {
    for (int64_t t : o.n_threads) {
      for (int64_t d : o.n_depth) {
        auto add = [&](int64_t p, int64_t n) {
          const int64_t batch = b > 0 ? b : std::max<int64_t>(512, p);
          tests.push_back({p, n, d, batch, static_cast<int>(t)});
        };
        for (int64_t p : o.n_prompt) {
          if (p > 0) add(p, 0);
        }
        for (int64_t n : o.n_gen) {
          if (n > 0) add(0, n);
        }
        if (o.pg) add(o.pg->first, o.pg->second);
      }
    }
  }
  return tests;
}

// Bytes of every matrix one decode step reads: all 2-D weights, with the
// token embedding counted only when it doubles as the (tied) output matrix —
// its lookup reads one row per token otherwise — and of a 3-D expert tensor
// the share of the experts one token uses.
uint64_t decode_weight_bytes(const model::Model& m) {
  const bool tied = m.weights().find("output.weight") == nullptr;
  const model::HParams& hp = m.hparams();
  uint64_t bytes = 0;
  for (const auto& w : m.weights().all()) {
    if (w.dims.size() < 2 || w.rows() < 2) continue;
    if (w.name == "token_embd.weight" && !tied) continue;
    if (w.dims.size() == 3 && hp.is_moe() && w.dims[2] == hp.n_expert) {
      bytes +=
          w.nbytes / static_cast<uint64_t>(hp.n_expert) * static_cast<uint64_t>(hp.n_expert_used);
      continue;
    }
    bytes += w.nbytes;
  }
  return bytes;
}

// Any fixed valid ids: a deterministic walk over the vocabulary.
std::vector<int32_t> bench_tokens(int64_t n, int64_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = 12345;
  for (auto& id : t) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return t;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

using Clock = std::chrono::steady_clock;

class BenchRunner {
 public:
  BenchRunner(const model::Model& model, const BenchOptions& o, runtime::RunOptions base,
              bool ctx_given, BenchPrinter& out);
  Status run(const TestSpec& t);

 private:
  Result<std::unique_ptr<runtime::Engine>> open_engine(const TestSpec& t);
  Status run_once(const TestSpec& t, std::span<const int32_t> all);
  Result<Bandwidth> bandwidth(runtime::Engine& e, int n_threads);

  const model::Model& model_;
  const BenchOptions& o_;
  runtime::RunOptions base_;
  bool ctx_given_;
  BenchPrinter& out_;
  BenchRecord common_;  // the fields every test shares
  std::unique_ptr<runtime::Engine> engine_;
  std::map<int, Bandwidth> host_bandwidth_;  // by thread count
  std::optional<Bandwidth> device_bandwidth_;
};

BenchRunner::BenchRunner(const model::Model& model, const BenchOptions& o, runtime::RunOptions base,
                         bool ctx_given, BenchPrinter& out)
    : model_(model), o_(o), base_(base), ctx_given_(ctx_given), out_(out) {
  common_.model_filename = model.path();
  common_.model_type = model::model_type_label(model);
  for (const auto& w : model.weights().all()) common_.model_size += w.nbytes;
  common_.model_n_params = model::parameter_count(model.weights());
  common_.type_k = lower(quant::type_name(base.k_type));
  common_.type_v = lower(quant::type_name(base.v_type));
  common_.decode_weight_bytes = decode_weight_bytes(model);
}

// The context a test runs in: depth + n_prompt + n_gen tokens (llama-bench's
// n_ctx), or -c's, which must hold them.
Result<int64_t> context_size(const TestSpec& t, const runtime::RunOptions& base, bool ctx_given) {
  const int64_t need = t.n_depth + t.n_prompt + t.n_gen;
  if (need > kMaxContext) {
    return Status::invalid_argument("test " + t.name() + " needs " + std::to_string(need) +
                                    " tokens of context, more than the " +
                                    std::to_string(kMaxContext) + " a session may hold");
  }
  if (ctx_given && base.n_ctx < need) {
    return Status::invalid_argument("--ctx-size " + std::to_string(base.n_ctx) +
                                    " is smaller than the " + std::to_string(need) +
                                    " tokens test " + t.name() + " needs");
  }
  return ctx_given ? base.n_ctx : need;
}

Result<std::unique_ptr<runtime::Engine>> BenchRunner::open_engine(const TestSpec& t) {
  runtime::RunOptions config = base_;
  config.n_threads = t.n_threads;
  config.max_batch = t.n_batch;
  MINFER_ASSIGN_OR_RETURN(config.n_ctx, context_size(t, base_, ctx_given_));
  runtime::EngineOptions eo = solo_engine_options(config);
  eo.n_ctx += 1;         // the request's last drawn token is never evaluated
  eo.graph_buckets = 0;  // exact step shapes, as llama-bench's
  // Pages that divide the depth: each run reuses the whole context.
  while (t.n_depth % eo.page_size != 0) eo.page_size /= 2;
  return runtime::Engine::create(model_, eo);
}

// A greedy request that evaluates `prompt` and then n_eval more tokens.
runtime::Request bench_request(std::span<const int32_t> prompt, int64_t n_eval,
                               int64_t max_reused) {
  runtime::SamplerParams greedy;
  greedy.temperature = 0.0f;
  runtime::Request r({prompt.begin(), prompt.end()}, greedy, n_eval + 1);
  r.max_reused = max_reused;
  r.ignore_eog = true;
  return r;
}

// One run of the test: a request of the context and the prompt (a tg test's
// first token when it has none), then greedy tokens until n_prompt + n_gen
// tokens past the context are evaluated.
Status BenchRunner::run_once(const TestSpec& t, std::span<const int32_t> all) {
  const int64_t prompt = t.n_depth + std::max<int64_t>(t.n_prompt, 1);
  const int64_t after = t.n_depth + t.n_prompt + t.n_gen - prompt;
  auto st = runtime::generate(
      *engine_, bench_request(all.first(static_cast<size_t>(prompt)), after, t.n_depth), nullptr);
  if (!st) return st.status();
  if (st->generated != after + 1) {
    return Status::internal("the run generated " + std::to_string(st->generated) + " tokens, not " +
                            std::to_string(after + 1));
  }
  return Status::ok();
}

Result<Bandwidth> BenchRunner::bandwidth(runtime::Engine& e, int n_threads) {
  if (o_.bandwidth_gbs > 0) return Bandwidth{o_.bandwidth_gbs, "given (--bandwidth)"};
  const bool gpu = e.runner().gpu();
  if (gpu && !device_bandwidth_) {
    MINFER_ASSIGN_OR_RETURN(std::optional<double> gbs, e.device_bandwidth_gbs());
    if (gbs) device_bandwidth_ = Bandwidth{*gbs, "measured on the GPU (device copy, best of 5)"};
  }
  if (gpu && device_bandwidth_) return *device_bandwidth_;
  if (auto it = host_bandwidth_.find(n_threads); it != host_bandwidth_.end()) return it->second;
  MINFER_ASSIGN_OR_RETURN(auto pool, ThreadPool::create(n_threads));
  double best = 0;
  for (int i = 0; i < kHostProbes; ++i) {
    if (i > 0) std::this_thread::sleep_for(kProbeGap);
    MINFER_ASSIGN_OR_RETURN(double gbs, measure_read_bandwidth(*pool, kProbeBytes, 2));
    best = std::max(best, gbs);
  }
  const Bandwidth b{best, "measured (best of " + std::to_string(kHostProbes) + ", " +
                              std::to_string(n_threads) +
                              (n_threads == 1 ? " thread)" : " threads)")};
  host_bandwidth_[n_threads] = b;
  return b;
}

Status BenchRunner::run(const TestSpec& t) {
  if (o_.delay_s > 0) std::this_thread::sleep_for(std::chrono::seconds(o_.delay_s));
  // The old engine lives until the new one exists, so GPU weights stay uploaded.
  MINFER_ASSIGN_OR_RETURN(engine_, open_engine(t));
  const auto all = bench_tokens(t.n_depth + t.n_prompt + t.n_gen, model_.hparams().n_vocab);
  const std::span<const int32_t> context(all.data(), static_cast<size_t>(t.n_depth));
  BenchRecord r = common_;
  r.n_prompt = t.n_prompt, r.n_gen = t.n_gen, r.n_depth = t.n_depth;
  r.n_batch = t.n_batch, r.n_threads = t.n_threads;
  r.backends = engine_->runner().gpu() ? std::string(engine_->runner().gpu_name()) : "CPU";
  r.test_time = utc_now();
  const std::string what = "test " + t.name();
  if (!context.empty()) {  // its pages stay cached for the runs
    MINFER_RETURN_IF_ERROR(runtime::generate(*engine_, bench_request(context, 0, -1), nullptr)
                               .status()
                               .with_context(what + ", depth"));
  }
  if (o_.warmup) MINFER_RETURN_IF_ERROR(run_once(t, all).with_context(what + ", warm-up"));
  for (int64_t rep = 0; rep < o_.reps; ++rep) {
    const auto t0 = Clock::now();
    MINFER_RETURN_IF_ERROR(run_once(t, all).with_context(what));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0);
    r.samples_ns.push_back(static_cast<uint64_t>(std::max<int64_t>(1, ns.count())));
  }
  if (t.n_prompt == 0) {  // a tg test: its roofline
    MINFER_ASSIGN_OR_RETURN(r.bandwidth, bandwidth(*engine_, t.n_threads));
    const std::vector<double> ts = r.samples_ts();
    double avg = 0;
    for (double x : ts) avg += x / static_cast<double>(ts.size());
    r.roofline_fraction =
        static_cast<double>(r.decode_weight_bytes) * avg / (r.bandwidth->gbs * 1e9);
  }
  return out_.record(r);
}

// A list option's values, or `fallback` when it is absent.
Result<std::vector<int64_t>> list_option(const ArgParser& p, std::string_view name,
                                         std::vector<int64_t> fallback, int64_t min, int64_t max) {
  const auto text = p.get(name);
  if (!text) return fallback;
  return parse_value_list(p.spelled(name), *text, min, max);
}

// -t's values: 0 becomes every hardware thread; more than the machine allows is an error.
Result<std::vector<int64_t>> thread_list(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(auto threads,
                          list_option(p, "--threads", {0}, 0, std::numeric_limits<int32_t>::max()));
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  for (int64_t& t : threads) {
    if (t > max_thread_count()) {
      return Status::invalid_argument(
          p.spelled("--threads") + ": " + std::to_string(t) + " is more than " +
          std::to_string(kMaxThreadsPerCore) + " per hardware thread (this machine has " +
          std::to_string(hw) + ", so at most " + std::to_string(max_thread_count()) + "; 0 = all)");
    }
    if (t == 0) t = hw;
  }
  return threads;
}

Result<BenchFormat> format_option(const ArgParser& p) {
  if (!p.has("--output")) return p.has("--json") ? BenchFormat::kJson : BenchFormat::kMarkdown;
  MINFER_ASSIGN_OR_RETURN(BenchFormat f,
                          parse_bench_format(p.spelled("--output"), p.get_or("--output", "")));
  if (p.has("--json") && f != BenchFormat::kJson) {
    return Status::invalid_argument("--json is -o json: it cannot go with " +
                                    p.spelled("--output"));
  }
  return f;
}

Result<std::pair<int64_t, int64_t>> pg_option(const ArgParser& p) {
  MINFER_ASSIGN_OR_RETURN(auto v, list_option(p, "-pg", {}, 0, kMaxContext));
  if (v.size() != 2 || (v[0] == 0 && v[1] == 0)) {
    return Status::invalid_argument(p.spelled("-pg") +
                                    ": give PROMPT,GEN (two counts, not both 0)");
  }
  return std::pair{v[0], v[1]};
}

// Reads the bench-specific options (every value checked, every error named).
Result<BenchOptions> bench_options(const ArgParser& p) {
  BenchOptions o;
  MINFER_ASSIGN_OR_RETURN(o.n_prompt, list_option(p, "--n-prompt", o.n_prompt, 0, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.n_gen, list_option(p, "--n-gen", o.n_gen, 0, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.n_depth, list_option(p, "--n-depth", o.n_depth, 0, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.n_batch, list_option(p, "--batch-size", {}, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.n_threads, thread_list(p));
  if (p.has("-pg")) {
    MINFER_ASSIGN_OR_RETURN(o.pg, pg_option(p));
  }
  MINFER_ASSIGN_OR_RETURN(o.reps, p.get_int("--repetitions", o.reps, 1, 1000000));
  MINFER_ASSIGN_OR_RETURN(o.delay_s, p.get_int("--delay", 0, 0, 3600));
  MINFER_ASSIGN_OR_RETURN(o.bandwidth_gbs, p.get_double("--bandwidth", 0.0, 0.0, 1e6));
  MINFER_ASSIGN_OR_RETURN(o.format, format_option(p));
  o.warmup = !p.has("--no-warmup");
  if (p.has("--bandwidth") && !(o.bandwidth_gbs > 0)) {
    return Status::invalid_argument("--bandwidth " + p.get_or("--bandwidth", "") +
                                    ": must be a positive number of GB/s");
  }
  const size_t n_tests = test_matrix(o).size();
  if (n_tests == 0)
    return Status::invalid_argument("no test to run: every -p and -n value is 0 and no -pg");
  if (n_tests > kMaxListValues) {
    return Status::invalid_argument(std::to_string(n_tests) + " tests: more than " +
                                    std::to_string(kMaxListValues) + " (shorten the lists)");
  }
  return o;
}

Status bench(const ArgParser& p, const BenchOptions& o) {
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions base, context_options(p, 1));
  MINFER_ASSIGN_OR_RETURN(base.tensor_parallel, tensor_parallel_ranks(p));
  MINFER_ASSIGN_OR_RETURN(base.tensor_parallel_address,
                          tensor_parallel_address(p, base.tensor_parallel));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/o.format != BenchFormat::kMarkdown));
  // Every test's context is checked before the first one runs.
  for (const TestSpec& t : test_matrix(o)) {
    MINFER_RETURN_IF_ERROR(context_size(t, base, p.has("--ctx-size")).status());
  }
  auto out = make_bench_printer(o.format, /*show_batch=*/p.has("--batch-size"));
  BenchRunner runner(*model, o, base, p.has("--ctx-size"), *out);
  MINFER_RETURN_IF_ERROR(out->begin());
  for (const TestSpec& t : test_matrix(o)) MINFER_RETURN_IF_ERROR(runner.run(t));
  return out->end();
}

}  // namespace

int run_bench(std::span<const std::string_view> args) {
  ArgParser p("bench",
              "-m MODEL.gguf [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [-b N] [-o md|json|jsonl|csv]\n"
              "  -p, -n, -d, -t and -b take lists (512,2048) and ranges (FIRST-LAST,\n"
              "  FIRST-LAST+STEP, FIRST-LAST*MULT); every combination is a test.");
  add_model_options(p);
  p.option("-p,--n-prompt", "LIST", "prompt tokens of the pp tests, 0 = none (512)");
  p.option("-n,--n-gen", "LIST", "generated tokens of the tg tests, 0 = none (128)");
  p.option("-pg", "P,N", "a test of P prompt tokens then N generated ones");
  p.option("-d,--n-depth", "LIST", "tokens in the context before each test (0)");
  p.option("-r,--repetitions", "N", "timed repetitions of each test (5)");
  p.option("--delay", "S", "seconds to wait before each test (0)");
  p.flag("--no-warmup", "skip the untimed run before each test's repetitions");
  p.option("-o,--output", "FORMAT", "md, json, jsonl or csv, with llama-bench's names (md)");
  p.flag("--json", "the same as -o json");
  p.option("--bandwidth", "GB/s", "bandwidth for the roofline (measured if absent)");
  if (auto exit_code = parse_command_line(p, "bench", args)) return *exit_code;
  auto o = bench_options(p);
  if (!o) return report("bench", o.status(), 2);
  return report("bench", bench(p, *o));
}

}  // namespace minfer::cli
