// `minfer synth`: writes a deterministic synthetic GGUF model.
#include <unistd.h>

#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "synth/presets.h"
#include "synth/synth.h"

namespace minfer::cli {
namespace {

ArgParser make_parser() {
  ArgParser p("synth", "--model SHAPE -o OUT.gguf [options]");
  p.option("--model,--shape", "SHAPE", "model shape (see --list)");
  p.option("-o,--output", "FILE", "output GGUF path");
  p.option("-q,--type", "TYPE", "quantization: F32, F16, BF16, Q4_0 ... Q6_K, Q4_K_M ... (Q8_0)");
  p.option("--embd-type", "TYPE", "type of token_embd.weight (default: by quantization)");
  p.option("--output-type", "TYPE", "type of output.weight (default: by quantization)");
  p.option("--seed", "N", "random seed (1)");
  p.option("--layers", "N", "override the number of layers");
  p.option("--split", "N", "write N parts: OUT-00001-of-0000N.gguf ...");
  p.option("--tokenizer-dir", "DIR", "Qwen2 tokenizer files (vocab.json, merges.txt)");
  p.option("-t,--threads", "N", "threads (all)");
  p.flag("--list", "list the model shapes and exit");
  p.flag("-s,--silent", "no progress output");
  return p;
}

// A mixture of experts shows its expert FFN width and "used/count" experts.
void list_presets() {
  std::printf("%-14s %-8s %6s %6s %6s %4s %6s %8s %8s\n", "shape", "arch", "d", "layers", "heads",
              "kv", "ffn", "vocab", "experts");
  for (const auto& s : synth::presets()) {
    const std::string experts =
        s.n_expert > 0 ? std::to_string(s.n_expert_used) + "/" + std::to_string(s.n_expert) : "-";
    std::printf("%-14s %-8s %6d %6d %6d %4d %6d %8d %8s\n", s.name.c_str(), s.arch.c_str(),
                s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_expert > 0 ? s.n_ff_exp : s.n_ff,
                s.n_vocab, experts.c_str());
  }
}

Status run(const ArgParser& p) {
  synth::SynthOptions o;
  o.shape = p.get_or("--model", "");
  if (o.shape.empty()) return Status::invalid_argument("--model SHAPE is required (see --list)");
  o.output_path = p.get_or("--output", "");
  if (o.output_path.empty()) return Status::invalid_argument("-o OUT.gguf is required");
  o.quant = p.get_or("--type", "Q8_0");
  if (auto t = p.get("--embd-type")) {
    MINFER_ASSIGN_OR_RETURN(o.embd_type, quant::parse_tensor_type(*t));
  }
  if (auto t = p.get("--output-type")) {
    MINFER_ASSIGN_OR_RETURN(o.output_type, quant::parse_tensor_type(*t));
  }
  MINFER_ASSIGN_OR_RETURN(o.seed, p.get_u64("--seed", 1));
  // 0 keeps the shape's own layer count; GGUF split names have five digits.
  MINFER_ASSIGN_OR_RETURN(int64_t layers, p.get_int("--layers", 0, 0, 4096));
  o.n_layer = static_cast<int>(layers);
  MINFER_ASSIGN_OR_RETURN(int64_t parts, p.get_int("--split", 1, 1, 99999));
  o.n_parts = static_cast<int>(parts);
  MINFER_ASSIGN_OR_RETURN(o.n_threads, thread_count(p));
  o.qwen2_tokenizer_dir = p.get_or("--tokenizer-dir", "");
  const bool silent = p.has("--silent");
  // Redrawn in place, so only on a terminal: a log gets the final line alone.
  const bool redraw = !silent && ::isatty(STDERR_FILENO);
  auto progress = [redraw](size_t i, size_t n, const std::string& name) {
    if (!redraw) return;
    std::fprintf(stderr, "\rsynth: [%zu/%zu] %-40s", i, n, name.c_str());
    if (i == n) std::fprintf(stderr, "\n");
  };
  MINFER_RETURN_IF_ERROR(synth::synthesize(o, progress));
  if (!silent) std::fprintf(stderr, "synth: wrote %s\n", o.output_path.c_str());
  return Status::ok();
}

}  // namespace

int run_synth(std::span<const std::string_view> args) {
  ArgParser p = make_parser();
  if (auto exit_code = parse_command_line(p, "synth", args)) return *exit_code;
  if (p.has("--list")) {
    list_presets();
    return 0;
  }
  return report("synth", run(p));
}

}  // namespace minfer::cli
