// `minfer bench`: prompt processing (pp) and generation (tg) speed with
// llama-bench's definitions, plus the decode roofline fraction.
//   pp: one batch of n_prompt tokens from an empty cache; t/s = n_prompt / time.
//   tg: n_gen tokens evaluated one at a time from an empty cache; t/s = n_gen / time.
// One warm-up run of each test precedes the timed repetitions; results are the
// mean and sample standard deviation over the repetitions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/bandwidth.h"
#include "backend/cpu/thread_pool.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "quant/tensor_type.h"

namespace minfer::cli {
namespace {

struct BenchOptions {
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int64_t reps = 5;
  bool json = false;
  double bandwidth_gbs = 0;  // 0: measure
};

struct TestResult {
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  std::vector<double> samples_ts;
  double avg = 0, sd = 0;
  double roofline = -1;  // tg only
};

// Bytes of every matrix one decode step reads: all 2-D weights, with the
// token embedding counted only when it doubles as the (tied) output matrix —
// its lookup reads one row per token otherwise.
uint64_t decode_weight_bytes(const model::Model& m) {
  const bool tied = m.weights().find("output.weight") == nullptr;
  uint64_t bytes = 0;
  for (const auto& w : m.weights().all()) {
    if (w.dims.size() < 2 || w.rows() < 2) continue;
    if (w.name == "token_embd.weight" && !tied) continue;
    bytes += w.nbytes;
  }
  return bytes;
}

// llama-bench's model column: architecture, size class and main weight type.
std::string model_type(const model::Model& m, int64_t n_params) {
  std::map<quant::TensorType, uint64_t> by_type;
  for (const auto& w : m.weights().all()) {
    if (w.dims.size() >= 2) by_type[w.type] += w.nbytes;
  }
  quant::TensorType main = quant::TensorType::F32;
  uint64_t most = 0;
  for (auto [t, b] : by_type) {
    if (b > most) most = b, main = t;
  }
  char buf[96];
  const double p = static_cast<double>(n_params);
  if (p >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%s %.1fB %s", m.hparams().arch_name.c_str(), p / 1e9,
                  std::string(quant::type_name(main)).c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "%s %.0fM %s", m.hparams().arch_name.c_str(), p / 1e6,
                  std::string(quant::type_name(main)).c_str());
  }
  return buf;
}

void summarize(TestResult& r) {
  const double n = static_cast<double>(r.samples_ts.size());
  double sum = 0;
  for (double s : r.samples_ts) sum += s;
  r.avg = sum / n;
  double ss = 0;
  for (double s : r.samples_ts) ss += (s - r.avg) * (s - r.avg);
  r.sd = r.samples_ts.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
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

using Clock = std::chrono::steady_clock;

Result<double> time_pp(runtime::Session& s, const std::vector<int32_t>& tokens) {
  s.reset();
  const auto t0 = Clock::now();
  MINFER_RETURN_IF_ERROR(s.eval(tokens, 1).status());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Result<double> time_tg(runtime::Session& s, const std::vector<int32_t>& tokens) {
  s.reset();
  const auto t0 = Clock::now();
  for (int32_t t : tokens)
    MINFER_RETURN_IF_ERROR(s.eval(std::span<const int32_t>(&t, 1), 1).status());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

Status bench(const ArgParser& p, const BenchOptions& o) {
  MINFER_ASSIGN_OR_RETURN(runtime::SessionOptions so, session_options(p, o.n_prompt + o.n_gen));
  if (!p.get("--batch-size")) so.max_batch = std::max<int64_t>(so.max_batch, o.n_prompt);
  if (so.n_threads <= 0)
    so.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  MINFER_ASSIGN_OR_RETURN(auto model, load_model(p, /*quiet=*/o.json));
  const int64_t need = std::max(o.n_prompt, o.n_gen);
  if (so.n_ctx < need) {
    return Status::out_of_range("--ctx-size " + std::to_string(so.n_ctx) + " is smaller than the " +
                                std::to_string(need) + " tokens a test needs");
  }
  uint64_t model_bytes = 0;
  int64_t n_params = 0;
  for (const auto& w : model->weights().all()) {
    model_bytes += w.nbytes;
    n_params += w.row_length() * w.rows();
  }
  double bw = o.bandwidth_gbs;
  bool measured = false;
  if (bw <= 0) {
    MINFER_ASSIGN_OR_RETURN(auto pool, cpu::ThreadPool::create(so.n_threads));
    MINFER_ASSIGN_OR_RETURN(bw, cpu::measure_read_bandwidth(*pool));
    measured = true;
  }
  const uint64_t per_token = decode_weight_bytes(*model);
  MINFER_ASSIGN_OR_RETURN(auto session, runtime::Session::create(*model, so));
  const auto tokens = bench_tokens(std::max(o.n_prompt, o.n_gen), model->hparams().n_vocab);
  const std::vector<int32_t> pp_tokens(tokens.begin(), tokens.begin() + o.n_prompt);
  const std::vector<int32_t> tg_tokens(tokens.begin(), tokens.begin() + o.n_gen);

  std::vector<TestResult> results(2);
  results[0].n_prompt = o.n_prompt;
  results[1].n_gen = o.n_gen;
  MINFER_RETURN_IF_ERROR(time_pp(*session, pp_tokens).status().with_context("pp warm-up"));
  for (int64_t r = 0; r < o.reps; ++r) {
    MINFER_ASSIGN_OR_RETURN(double sec, time_pp(*session, pp_tokens));
    results[0].samples_ts.push_back(static_cast<double>(o.n_prompt) / sec);
  }
  MINFER_RETURN_IF_ERROR(time_tg(*session, tg_tokens).status().with_context("tg warm-up"));
  for (int64_t r = 0; r < o.reps; ++r) {
    MINFER_ASSIGN_OR_RETURN(double sec, time_tg(*session, tg_tokens));
    results[1].samples_ts.push_back(static_cast<double>(o.n_gen) / sec);
  }
  for (auto& r : results) summarize(r);
  results[1].roofline = static_cast<double>(per_token) * results[1].avg / (bw * 1e9);

  const std::string type = model_type(*model, n_params);
  const std::string path = p.get_or("--model", "");
  if (o.json) {
    std::printf("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const TestResult& r = results[i];
      std::printf(
          "  {\"model_filename\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, "
          "\"model_n_params\": %lld, \"n_threads\": %d, \"n_prompt\": %lld, "
          "\"n_gen\": %lld, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ts\": [",
          json_escape(path).c_str(), json_escape(type).c_str(),
          static_cast<unsigned long long>(model_bytes), static_cast<long long>(n_params),
          so.n_threads, static_cast<long long>(r.n_prompt), static_cast<long long>(r.n_gen), r.avg,
          r.sd);
      for (size_t k = 0; k < r.samples_ts.size(); ++k) {
        std::printf("%s%.6f", k ? ", " : "", r.samples_ts[k]);
      }
      std::printf(
          "], \"read_bandwidth_gbs\": %.3f, \"bandwidth_measured\": %s, "
          "\"decode_weight_bytes\": %llu",
          bw, measured ? "true" : "false", static_cast<unsigned long long>(per_token));
      if (r.roofline >= 0) std::printf(", \"roofline_fraction\": %.4f", r.roofline);
      std::printf("}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("]\n");
    return Status::ok();
  }
  std::printf(
      "read bandwidth: %.2f GB/s (%s); weights read per decoded token: %.1f MB "
      "(roofline %.1f t/s)\n\n",
      bw, measured ? "measured" : "given", static_cast<double>(per_token) / 1e6,
      bw * 1e9 / static_cast<double>(per_token));
  std::printf("| %-22s | %10s | %9s | %7s | %6s | %18s | %8s |\n", "model", "size", "params",
              "threads", "test", "t/s", "roofline");
  std::printf("| %s | %s: | %s: | %s: | %s: | %s: | %s: |\n", std::string(22, '-').c_str(),
              std::string(9, '-').c_str(), std::string(8, '-').c_str(), std::string(6, '-').c_str(),
              std::string(5, '-').c_str(), std::string(17, '-').c_str(),
              std::string(7, '-').c_str());
  for (const TestResult& r : results) {
    const std::string test =
        r.n_prompt > 0 ? "pp" + std::to_string(r.n_prompt) : "tg" + std::to_string(r.n_gen);
    char ts[48], size[32], params[32], roof[16] = "";
    std::snprintf(ts, sizeof(ts), "%.2f ± %.2f", r.avg, r.sd);
    std::snprintf(size, sizeof(size), "%.2f MiB", static_cast<double>(model_bytes) / 1048576.0);
    std::snprintf(params, sizeof(params), "%.2f M", static_cast<double>(n_params) / 1e6);
    if (r.roofline >= 0) std::snprintf(roof, sizeof(roof), "%.1f%%", 100.0 * r.roofline);
    // "±" is two bytes but one column: pad by one more.
    std::printf("| %-22s | %10s | %9s | %7d | %6s | %19s | %8s |\n", type.c_str(), size, params,
                so.n_threads, test.c_str(), ts, roof);
  }
  return Status::ok();
}

// Reads the bench-specific options; every count must be positive.
Result<BenchOptions> bench_options(const ArgParser& p) {
  BenchOptions o;
  MINFER_ASSIGN_OR_RETURN(o.n_prompt, p.get_int("--n-prompt", o.n_prompt, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.n_gen, p.get_int("--n-gen", o.n_gen, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.reps, p.get_int("--repetitions", o.reps, 1, 1000000));
  MINFER_ASSIGN_OR_RETURN(o.bandwidth_gbs, p.get_double("--bandwidth", 0.0, 0.0, 1e6));
  o.json = p.has("--json");
  if (p.has("--bandwidth") && !(o.bandwidth_gbs > 0)) {
    return Status::invalid_argument("--bandwidth " + p.get_or("--bandwidth", "") +
                                    ": must be a positive number of GB/s");
  }
  return o;
}

}  // namespace

int run_bench(std::span<const std::string_view> args) {
  ArgParser p("bench", "-m MODEL.gguf [-p 512] [-n 128] [-r 5] [-t N] [--json]");
  add_model_options(p);
  p.option("-p,--n-prompt", "N", "prompt tokens of the pp test (512)");
  p.option("-n,--n-gen", "N", "generated tokens of the tg test (128)");
  p.option("-r,--repetitions", "N", "timed repetitions of each test (5)");
  p.option("--bandwidth", "GB/s", "read bandwidth for the roofline (measured if absent)");
  p.flag("--json", "print a JSON list with llama-bench's field names");
  if (auto exit_code = parse_command_line(p, "bench", args)) return *exit_code;
  auto o = bench_options(p);
  if (!o) return report("bench", o.status(), 2);
  return report("bench", bench(p, *o));
}

}  // namespace minfer::cli
