#include "cli/common.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace minfer::cli {

void add_model_options(ArgParser& p) {
  p.option("-m,--model", "FILE", "GGUF model file");
  p.option("-t,--threads", "N", "CPU threads (all)");
  p.option("-c,--ctx-size", "N", "context size in tokens");
  p.option("--cache-type", "TYPE",
           "KV cache type for K and V: f32, f16 or q8_0 (f16; env MINFER_CACHE_TYPE)");
  p.option("-ctk,--cache-type-k", "TYPE", "KV cache type for K (overrides --cache-type)");
  p.option("-ctv,--cache-type-v", "TYPE", "KV cache type for V (overrides --cache-type)");
  p.option("-b,--batch-size", "N", "tokens per prefill graph (512)");
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
  if (!path || path->empty()) return Status::error("no model given (-m FILE.gguf)");
  int last_pct = -1;
  auto bar = [&](double f) {
    const int pct = static_cast<int>(f * 100.0);
    if (quiet || pct == last_pct) return;
    last_pct = pct;
    const int filled = pct / 4;
    std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%", path->c_str(), filled,
                 "#########################", 25 - filled, "", pct);
    if (pct == 100) std::fprintf(stderr, "\n");
  };
  auto m = model::Model::load(*path, bar);
  if (m && !quiet) std::fprintf(stderr, "model: %s\n", (*m)->describe().c_str());
  return m;
}

Result<runtime::SessionOptions> session_options(const ArgParser& p, int64_t default_ctx) {
  runtime::SessionOptions o;
  MINFER_ASSIGN_OR_RETURN(int64_t threads, p.get_int("--threads", 0));
  if (threads < 0) return Status::error("--threads " + std::to_string(threads) + " < 0");
  o.n_threads = static_cast<int>(threads);
  MINFER_ASSIGN_OR_RETURN(o.n_ctx, p.get_int("--ctx-size", default_ctx));
  if (o.n_ctx < 1) return Status::error("--ctx-size " + std::to_string(o.n_ctx) + " must be > 0");
  MINFER_ASSIGN_OR_RETURN(o.max_batch, p.get_int("--batch-size", 512));
  if (o.max_batch < 1) return Status::error("--batch-size must be > 0");
  // The env var sets both; --cache-type beats it; -ctk/-ctv beat both for their half.
  std::string both = "f16";
  std::string both_from = "default";
  if (const char* env = std::getenv("MINFER_CACHE_TYPE"); env != nullptr && *env) {
    both = env;
    both_from = "MINFER_CACHE_TYPE";
  }
  if (auto flag = p.get("--cache-type")) {
    both = *flag;
    both_from = "--cache-type";
  }
  auto parse = [&](const char* flag) -> Result<quant::TensorType> {
    const auto given = p.get(flag);
    auto t = runtime::parse_cache_type(given ? *given : both);
    if (!t) return Status::error((given ? std::string(flag) : both_from) + ": " + t.message());
    return t;
  };
  MINFER_ASSIGN_OR_RETURN(o.k_type, parse("--cache-type-k"));
  MINFER_ASSIGN_OR_RETURN(o.v_type, parse("--cache-type-v"));
  return o;
}

Result<runtime::SamplerParams> sampler_params(const ArgParser& p) {
  runtime::SamplerParams s;
  MINFER_ASSIGN_OR_RETURN(double temp, p.get_double("--temp", s.temperature));
  MINFER_ASSIGN_OR_RETURN(int64_t top_k, p.get_int("--top-k", s.top_k));
  MINFER_ASSIGN_OR_RETURN(double top_p, p.get_double("--top-p", s.top_p));
  MINFER_ASSIGN_OR_RETURN(double min_p, p.get_double("--min-p", s.min_p));
  MINFER_ASSIGN_OR_RETURN(double penalty, p.get_double("--repeat-penalty", s.repeat_penalty));
  MINFER_ASSIGN_OR_RETURN(int64_t last_n, p.get_int("--repeat-last-n", s.repeat_last_n));
  // Without --seed, a fresh seed each run; the CLI prints it so a run can be repeated.
  const auto fresh = static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
  MINFER_ASSIGN_OR_RETURN(int64_t seed, p.get_int("--seed", fresh));
  s.temperature = static_cast<float>(temp);
  s.top_k = static_cast<int>(top_k);
  s.top_p = static_cast<float>(top_p);
  s.min_p = static_cast<float>(min_p);
  s.repeat_penalty = static_cast<float>(penalty);
  s.repeat_last_n = static_cast<int>(last_n);
  s.seed = static_cast<uint64_t>(seed);
  return s;
}

Result<std::string> read_prompt(const ArgParser& p) {
  auto text = p.get("--prompt");
  auto file = p.get("--file");
  if (text && file) return Status::error("give either -p TEXT or -f FILE, not both");
  if (text) return *text;
  if (!file) return Status::error("no prompt given (-p TEXT or -f FILE)");
  // A directory opens as a stream that reads nothing: it would pass for an empty prompt.
  std::error_code ec;
  if (std::filesystem::is_directory(*file, ec)) {
    return Status::error("prompt file '" + *file + "' is a directory");
  }
  std::ifstream in(*file, std::ios::binary);
  if (!in) return Status::error("cannot read prompt file '" + *file + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace minfer::cli
