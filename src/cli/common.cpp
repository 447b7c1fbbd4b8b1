#include "cli/common.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "backend/registry.h"
#include "base/progress.h"
#include "base/utf8.h"

namespace minfer::cli {
namespace {

// Loads shorter than this (a fraction of a second) get no bar.
constexpr uint64_t kBarMinBytes = uint64_t{64} << 20;

// A cache type as the flags spell it ("f16").
std::string cache_type_spelling(quant::TensorType t) {
  std::string s(quant::type_name(t));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const Result<Options>& environment() {
  static const Result<Options> env = Options::from_env(backend::option_sections());
  return env;
}

void add_model_options(ArgParser& p) {
  // The defaults shown are RunOptions', the ones the flags leave in place.
  const runtime::RunOptions defaults;
  p.option("-m,--model", "FILE", "GGUF model file");
  p.option("-t,--threads", "N", "CPU threads (all)");
  p.option("-c,--ctx-size", "N", "context size in tokens");
  p.option("--cache-type", "TYPE",
           "KV cache type for K and V: f32, f16 or q8_0 (" + cache_type_spelling(defaults.k_type) +
               "; env MINFER_CACHE_TYPE)");
  p.option("-ctk,--cache-type-k", "TYPE", "KV cache type for K (overrides --cache-type)");
  p.option("-ctv,--cache-type-v", "TYPE", "KV cache type for V (overrides --cache-type)");
  p.option("-b,--batch-size", "N",
           "tokens per prefill graph (" + std::to_string(defaults.max_batch) + ")");
  p.option("-tp,--tensor-parallel-size", "N",
           "split the model over N tensor-parallel ranks (1; N CPU ranks in this process)");
  p.option("--tensor-split", "LIST",
           "llama.cpp's spelling: equal shares, one per rank (\"1,1\" = 2 ranks)");
  p.option("--tp-init", "HOST:PORT",
           "one rank per process: listen there as rank 0 for `minfer tp-worker` ranks");
}

void add_sampling_options(ArgParser& p) {
  p.option("--temp", "T", "temperature, <= 0 for greedy (0.8)");
  p.option("--top-k", "N", "top-k, 0 = off (40)");
  p.option("--top-p", "P", "top-p, 1 = off (0.95)");
  p.option("--min-p", "P", "min-p, 0 = off (0.05)");
  p.option("--repeat-penalty", "X", "repetition penalty, 1 = off (1.0)");
  p.option("--repeat-last-n", "N", "tokens the penalty looks back over (64)");
  p.option("-s,--seed", "N", "sampling seed (random; printed on stderr)");
}

Result<std::unique_ptr<model::Model>> load_model(const ArgParser& p, bool quiet) {
  auto path = p.get("--model");
  if (!path || path->empty()) return Status::invalid_argument("no model given (-m FILE.gguf)");
  // A bar on a terminal only, so that logs and pipes get no '\r' frames. No
  // size (a FIFO, a missing file) means no bar; the load says what is wrong.
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(*path, ec);
  const bool shown = !quiet && !ec && ProgressBar::shown_on(stderr, bytes, kBarMinBytes);
  ProgressBar bar(stderr, shown, "loading " + printable_text(*path), bytes);
  auto m = model::Model::load(
      *path, [&](double f) { bar.update(static_cast<uint64_t>(f * static_cast<double>(bytes))); });
  if (!m) return m;
  bar.finish();
  if (!quiet) std::fprintf(stderr, "model: %s\n", printable_text((*m)->describe()).c_str());
  return m;
}

int64_t max_thread_count() {
  return kMaxThreadsPerCore * std::max<int64_t>(1, std::thread::hardware_concurrency());
}

Result<int> thread_count(const ArgParser& p) {
  // More threads than cores only adds switching; far more is a typo (or a
  // value meant for another flag), and the system may not give them at all.
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  MINFER_ASSIGN_OR_RETURN(int64_t threads,
                          p.get_int("--threads", 0, 0, std::numeric_limits<int32_t>::max()));
  if (threads > max_thread_count()) {
    return Status::invalid_argument(
        p.spelled("--threads") + ": more than " + std::to_string(kMaxThreadsPerCore) +
        " per hardware thread (this machine has " + std::to_string(hw) + ", so at most " +
        std::to_string(kMaxThreadsPerCore * hw) + "; 0 = all)");
  }
  return static_cast<int>(threads);
}

Result<runtime::RunOptions> run_options(const ArgParser& p, int64_t default_ctx) {
  MINFER_ASSIGN_OR_RETURN(runtime::RunOptions o, context_options(p, default_ctx));
  MINFER_ASSIGN_OR_RETURN(o.n_threads, thread_count(p));
  MINFER_ASSIGN_OR_RETURN(o.max_batch, p.get_int("--batch-size", o.max_batch, 1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(o.tensor_parallel, tensor_parallel_ranks(p));
  MINFER_ASSIGN_OR_RETURN(o.tensor_parallel_address, tensor_parallel_address(p, o.tensor_parallel));
  return o;
}

Result<std::string> tensor_parallel_address(const ArgParser& p, int ranks) {
  auto a = p.get("--tp-init");
  if (!a) return std::string();
  std::string address = *a;
  if (address.rfind("tcp://", 0) == 0) address = address.substr(6);  // vLLM's spelling
  if (address.empty() || ranks < 2) {
    return Status::invalid_argument("--tp-init '" + *a +
                                    "': give HOST:PORT and -tp N with N of at least 2");
  }
  return address;
}

Result<int> tensor_parallel_ranks(const ArgParser& p) {
  constexpr int64_t kMaxRanks = 64;
  MINFER_ASSIGN_OR_RETURN(int64_t n, p.get_int("--tensor-parallel-size", 1, 1, kMaxRanks));
  const auto split = p.get("--tensor-split");
  if (!split) return static_cast<int>(n);
  // Proportions, one per rank: minfer cuts heads and columns evenly, so
  // every share must be the same.
  std::vector<std::string> shares;
  size_t start = 0;
  for (size_t comma; (comma = split->find_first_of(",/", start)) != std::string::npos;
       start = comma + 1) {
    shares.push_back(split->substr(start, comma - start));
  }
  shares.push_back(split->substr(start));
  for (const std::string& s : shares) {
    if (s.empty() || s != shares[0]) {
      return Status::invalid_argument("--tensor-split '" + *split +
                                      "': minfer splits evenly; give equal shares, one per rank "
                                      "(\"1,1\" for 2 ranks)");
    }
  }
  if (p.has("--tensor-parallel-size") && static_cast<int64_t>(shares.size()) != n) {
    return Status::invalid_argument("--tensor-split names " + std::to_string(shares.size()) +
                                    " ranks, " + p.spelled("--tensor-parallel-size") + " " +
                                    std::to_string(n));
  }
  if (static_cast<int64_t>(shares.size()) > kMaxRanks) {
    return Status::invalid_argument("--tensor-split: more than " + std::to_string(kMaxRanks) +
                                    " ranks");
  }
  return static_cast<int>(shares.size());
}

Result<runtime::RunOptions> context_options(const ArgParser& p, int64_t default_ctx) {
  runtime::RunOptions o;
  MINFER_ASSIGN_OR_RETURN(o.n_ctx, p.get_int("--ctx-size", default_ctx, 1, kMaxContext));
  o.options = environment().is_ok() ? *environment() : Options{};
  // The env var sets both; --cache-type beats it; -ctk/-ctv beat both for
  // their half. With none of them RunOptions' type stays, marked as not chosen.
  std::optional<std::string> both;
  std::string both_from;
  if (const std::string& env = o.options.cache_type; !env.empty()) {
    both = env;
    both_from = "MINFER_CACHE_TYPE";
  }
  if (auto flag = p.get("--cache-type")) {
    both = *flag;
    both_from = "--cache-type";
  }
  auto parse = [&](const char* flag, quant::TensorType& type) -> Status {
    const auto given = p.get(flag);
    if (!given && !both) return Status::ok();
    auto t = runtime::parse_cache_type(given ? *given : *both);
    if (!t)
      return Status::invalid_argument((given ? std::string(flag) : both_from) + ": " + t.message());
    type = *t;
    return Status::ok();
  };
  MINFER_RETURN_IF_ERROR(parse("--cache-type-k", o.k_type));
  MINFER_RETURN_IF_ERROR(parse("--cache-type-v", o.v_type));
  o.cache_types_are_defaults = !both && !p.has("--cache-type-k") && !p.has("--cache-type-v");
  return o;
}

Result<uint64_t> seed_option(const ArgParser& p, std::string_view flag) {
  // -1 (llama.cpp's spelling) or no flag: a fresh seed each run, which the
  // commands print so that passing it back repeats the run.
  if (p.get(flag) == "-1" || !p.has(flag)) return uint64_t{std::random_device{}() & 0x7fffffff};
  return p.get_u64(flag, 0);
}

Result<runtime::SamplerParams> sampler_params(const ArgParser& p) {
  runtime::SamplerParams s;
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  MINFER_ASSIGN_OR_RETURN(double temp, p.get_double("--temp", s.temperature, -1e9, 1e9));
  MINFER_ASSIGN_OR_RETURN(int64_t top_k, p.get_int("--top-k", s.top_k, 0, kIntMax));
  MINFER_ASSIGN_OR_RETURN(double top_p, p.get_double("--top-p", s.top_p, 0.0, 1.0));
  MINFER_ASSIGN_OR_RETURN(double min_p, p.get_double("--min-p", s.min_p, 0.0, 1.0));
  MINFER_ASSIGN_OR_RETURN(double penalty,
                          p.get_double("--repeat-penalty", s.repeat_penalty, 1e-6, 1e6));
  // -1 means the whole context, as in llama.cpp.
  MINFER_ASSIGN_OR_RETURN(int64_t last_n,
                          p.get_int("--repeat-last-n", s.repeat_last_n, -1, kMaxContext));
  MINFER_ASSIGN_OR_RETURN(s.seed, seed_option(p, "--seed"));
  s.temperature = static_cast<float>(temp);
  s.top_k = static_cast<int>(top_k);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.repeat_penalty = static_cast<float>(penalty);
  s.repeat_last_n = static_cast<int>(last_n);
  return s;
}

Result<std::string> read_prompt(const ArgParser& p) {
  auto text = p.get("--prompt");
  auto file = p.get("--file");
  if (text && file) return Status::invalid_argument("give either -p TEXT or -f FILE, not both");
  if (text) return *text;
  if (!file) return Status::invalid_argument("no prompt given (-p TEXT or -f FILE)");
  if (*file == "-") {  // standard input, to its end
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    if (std::cin.bad()) return Status::io_error("cannot read the prompt from standard input");
    return ss.str();
  }
  return read_text_file(*file, "prompt file");
}

runtime::EngineOptions solo_engine_options(const runtime::RunOptions& run) {
  runtime::EngineOptions eo(run);
  eo.n_slots = 1;
  eo.options.batch_invariant = false;
  return eo;
}

Result<std::unique_ptr<runtime::Engine>> solo_engine(const model::Model& model,
                                                     const runtime::RunOptions& run) {
  return runtime::Engine::create(model, solo_engine_options(run));
}

Result<std::string> read_text_file(const std::string& path, std::string_view what) {
  // A directory opens as a stream that reads nothing: it would pass for empty text.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::invalid_argument(std::string(what) + " '" + path + "' is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("cannot read " + std::string(what) + " '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io_error("cannot read " + std::string(what) + " '" + path + "'");
  return ss.str();
}

}  // namespace minfer::cli
