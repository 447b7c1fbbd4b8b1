// Options: every MINFER_* environment variable, read in one place by one
// rule into a typed struct that is passed down to what uses it.
//
// Contract:
//   - from_env() reads the process environment once per call; parse() reads
//     through any lookup function (tests pass a map). Both return an error
//     naming the variable, its value and what it accepts, for any value that
//     is not valid: nothing is silently taken as a default.
//   - Flags accept 1/true/yes/on and 0/false/no/off (any case); unset or
//     empty means the default. Numbers must parse whole and be in range.
//   - The struct's defaults are the engine's defaults: Options{} is what an
//     empty environment gives.
//   - Who reads it: the CLI calls from_env() once at startup and passes the
//     result down (SessionOptions::options, and from there the backends, the
//     fusion pass and the executor). Choices that are process-wide by nature
//     (the CPU's SIMD level, the CUDA device and PDL, made once at first
//     use) read process_options(), which is from_env() taken once.
//   - variables() lists every variable with its meaning, for --help texts
//     and the README check.
// Threading: plain values; process_options() is initialized thread-safely.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace minfer {

struct Options {
  // Backends.
  bool disable_cuda = false;    // MINFER_DISABLE_CUDA: the CPU alone
  int cuda_device = 0;          // MINFER_CUDA_DEVICE: which GPU
  double gpu_timeout_s = 10.0;  // MINFER_GPU_TIMEOUT: deadline of every GPU wait
  bool no_cuda_graph = false;   // MINFER_NO_CUDA_GRAPH: no CUDA graph replay
  bool gemv_f32 = false;        // MINFER_GEMV_F32: GPU decode GEMVs on f32 activations
  bool no_pdl = false;          // MINFER_NO_PDL: no programmatic dependent launch
  bool no_split_kv = false;     // MINFER_NO_SPLIT_KV: no split-KV decode attention
  bool disable_vulkan = false;  // MINFER_DISABLE_VULKAN: no Vulkan device
  int vulkan_device = -1;       // MINFER_VULKAN_DEVICE: which Vulkan device (-1: the best)
  // MINFER_VULKAN_VALIDATION: the Khronos validation layer, where installed.
  bool vulkan_validation = false;
  // MINFER_DISABLE_METAL (or MINFER_DISABLE_MPS, its older name): no Metal device.
  bool disable_metal = false;
  // MINFER_WEIGHT_COPY: GPU weights copied into buffers, not read in place
  // from the mapped file (unified-memory devices).
  bool weight_copy = false;
  std::string metallib_file;   // MINFER_METALLIB_FILE: a Metal kernel library to load
  bool no_gpu_replay = false;  // MINFER_NO_GPU_REPLAY: record every split, never resubmit one
  // MINFER_BATCH_INVARIANT (on): the engine's batches compute every token
  // with arithmetic that does not depend on the rest of the batch.
  bool batch_invariant = true;
  bool cpu_scalar = false;     // MINFER_CPU_SCALAR: scalar CPU kernels
  bool cpu_no_avx512 = false;  // MINFER_CPU_NO_AVX512: AVX2 prefill GEMM
  // MINFER_CPU_NO_REPACK: CPU matmuls read the file's rows, no packed copy.
  bool cpu_no_repack = false;
  // Fusions (each off for A/B comparisons).
  bool no_fuse_glu = false;       // MINFER_NO_FUSE_GLU
  bool no_fuse_qkv = false;       // MINFER_NO_FUSE_QKV
  bool no_fuse_qkv_norm = false;  // MINFER_NO_FUSE_QKV_NORM
  bool no_fuse_ffn = false;       // MINFER_NO_FUSE_FFN
  bool no_fuse_add = false;       // MINFER_NO_FUSE_ADD
  bool no_fuse_norm = false;      // MINFER_NO_FUSE_NORM
  // Observability.
  bool graph_trace = false;  // MINFER_GRAPH_TRACE: log each new plan
  bool op_profile = false;   // MINFER_OP_PROFILE: per-op time tables
  std::string trace_dir;     // MINFER_TRACE: dump every node's output there
  // Defaults for command-line settings (the flags beat them).
  std::string cache_type;           // MINFER_CACHE_TYPE: K and V cache type ("" = f16)
  std::string qwen2_tokenizer_dir;  // MINFER_QWEN2_TOKENIZER: for `minfer synth`

  using Lookup = std::function<std::optional<std::string>(std::string_view name)>;
  static Result<Options> parse(const Lookup& lookup);
  static Result<Options> from_env();
};

struct OptionVariable {
  std::string_view name;
  std::string_view help;
};
std::span<const OptionVariable> option_variables();

// from_env() taken once, for the process-wide choices named above. An
// invalid environment gives the defaults here; the CLI has refused it first.
const Options& process_options();

}  // namespace minfer
