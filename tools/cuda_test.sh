#!/bin/bash
# Builds minfer with CUDA and runs the GPU tests, a 0.5B decode/prefill timing
# and compute-sanitizer over the op tests, on a machine with an NVIDIA GPU.
#   bash tools/cuda_test.sh [BUILD_DIR] [DEPS_PREFIX]
# DEPS_PREFIX (optional): a prefix with lib/pkgconfig/{libpcre2-8,libutf8proc}.pc,
# static libs and gtest, for machines without those packages (docs/CUDA.md).
# Logs go to $OUT (default: BUILD_DIR/cuda_logs). CUDA_TEST_NO_SANITIZER=1 skips
# compute-sanitizer; GPU_BANDWIDTH_GBS sets the roofline's bandwidth (default
# 4300, the device-to-device copy rate measured on an H200).
set -u
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
deps=${2:-}
[ -n "$deps" ] && deps=$(cd "$deps" && pwd)  # pkg-config paths must be absolute
out=${OUT:-$build/cuda_logs}
mkdir -p "$out"
args=(-G Ninja -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90} -DMINFER_FUZZ=OFF)
if [ -n "$deps" ]; then
  export PKG_CONFIG_PATH=$deps/lib/pkgconfig
  args+=(-DGTEST_ROOT="$deps")
fi
cmake -S . -B "$build" "${args[@]}" > "$out/cfg.log" 2>&1 || { tail -30 "$out/cfg.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" > "$out/build.log" 2>&1 ||
  { grep -B2 -A12 -m8 error "$out/build.log"; exit 1; }
rc=0
"$build/tests/minfer_backend_test" --gtest_filter='cuda_*' > "$out/backend.log" 2>&1 || rc=1
grep -E "^\[  (PASSED|FAILED|SKIPPED)|max diff" "$out/backend.log"
"$build/tests/minfer_model_test" --gtest_filter='*CudaForward*' > "$out/model.log" 2>&1 || rc=1
grep -E "^\[  (PASSED|FAILED|SKIPPED)|gpu " "$out/model.log"
"$build/tests/minfer_runtime_test" --gtest_filter='CudaEngine*' > "$out/runtime.log" 2>&1 || rc=1
grep -E "^\[  (PASSED|FAILED|SKIPPED)" "$out/runtime.log"
tok=()
[ -n "$deps" ] && [ -d "$deps/qwen2-tokenizer" ] && tok=(--tokenizer-dir "$deps/qwen2-tokenizer")
# The roofline divides by the GPU's measured copy bandwidth unless GPU_BANDWIDTH_GBS is set.
bw=()
[ -n "${GPU_BANDWIDTH_GBS:-}" ] && bw=(--bandwidth "$GPU_BANDWIDTH_GBS")
model=$build/qwen2.5-0.5b-Q4_0.gguf
"$build/minfer" synth --model qwen2.5-0.5b -q Q4_0 "${tok[@]}" -o "$model" -s && {
  "$build/minfer" run -m "$model" -n 64 --temp 0 -p "Hello, my name is" 2>&1 | tail -1
  MINFER_DISABLE_CUDA=1 "$build/minfer" run -m "$model" -n 64 --temp 0 -p "Hello" 2>&1 | tail -1
  head -c 6000 tests/data/text.txt > "$build/prompt.txt"
  "$build/minfer" run -m "$model" -f "$build/prompt.txt" -n 64 --temp 0 2>&1 | tail -1
  # Speed: decode with graph replay on and off, prefill (pp2048); per-op and
  # per-kernel decode profiles.
  "$build/minfer" bench -m "$model" -p 512 -n 128 -r 3 "${bw[@]}" 2>&1 |
    grep -E "pp512|tg128|roofline bandwidth|rror"
  MINFER_NO_CUDA_GRAPH=1 "$build/minfer" bench -m "$model" -p 0 -n 128 -r 2 "${bw[@]}" 2>&1 |
    grep -E "tg128|rror"
  "$build/minfer" bench -m "$model" -p 2048 -n 1 -r 3 2>&1 | grep -E "pp2048|rror|must"
  MINFER_OP_PROFILE=1 "$build/minfer" run -m "$model" -n 32 --temp 0 -p "Hello" \
    > "$out/profile.log" 2>&1
  grep -A14 "op profile" "$out/profile.log" | tail -15
  [ -n "${CUDA_KERNEL_PROFILE:-}" ] && bash tools/cuda_kernel_profile.sh "$build/minfer" "$model" "$out"
}
# Greedy decoding of a Gemma 3 270M-shaped model (synthetic: the real GGUF is
# not available on the GPU machine) is identical across runs.
g3=$build/gemma3-270m-Q4_K_M.gguf
if "$build/minfer" synth --model gemma3-270m -q Q4_K_M -o "$g3" -s; then
  g3a=$("$build/minfer" run -m "$g3" -n 48 --temp 0 -p "The capital of France is" 2> /dev/null)
  g3b=$("$build/minfer" run -m "$g3" -n 48 --temp 0 -p "The capital of France is" 2> /dev/null)
  if [ -n "$g3a" ] && [ "$g3a" = "$g3b" ]; then
    echo "gemma3-270m (synthetic) greedy, 48 tokens: identical across two runs"
  else
    echo "gemma3-270m (synthetic) greedy: runs differ or are empty"
    rc=1
  fi
fi
# CUDA_BENCH_7B=1: pp2048 and tg128 on a synthetic Qwen2.5-7B, Q4_K (synth: ~1 min on 16 cores).
if [ "${CUDA_BENCH_7B:-0}" = 1 ]; then
  big=$build/qwen2.5-7b-Q4_K.gguf
  "$build/minfer" synth --model qwen2.5-7b -q Q4_K "${tok[@]}" -o "$big" -s &&
    "$build/minfer" bench -m "$big" -p 2048 -n 128 -r 2 "${bw[@]}" \
      2>&1 | grep -E "pp2048|tg128|roofline bandwidth|rror|must"
  if [ -n "${CUDA_KERNEL_PROFILE:-}" ]; then
    mkdir -p "$out/7b"
    bash tools/cuda_kernel_profile.sh "$build/minfer" "$big" "$out/7b"
  fi
  rm -f "$big"
fi
if [ -z "${CUDA_TEST_NO_SANITIZER:-}" ] && command -v compute-sanitizer > /dev/null; then
  timeout 150 compute-sanitizer --tool memcheck "$build/tests/minfer_backend_test" \
    --gtest_filter='cuda_Ops*:cuda_GetRows*:cuda_Weights*:cuda_GemvQ8*' > "$out/memcheck.log" 2>&1 || rc=1
  grep "ERROR SUMMARY" "$out/memcheck.log"
  timeout 240 compute-sanitizer --tool racecheck "$build/tests/minfer_backend_test" \
    --gtest_filter='cuda_Ops.KvStore*:cuda_Ops.RmsNorm*:cuda_Ops.SplitKv*:cuda_GemvQ8.FusedFfn*' \
    > "$out/racecheck.log" 2>&1 || rc=1
  grep "RACECHECK SUMMARY" "$out/racecheck.log"
  # A prefill and decode steps end to end (fused decode kernels, GEMV splits).
  # (MatchesReference runs the f32 GEMVs, Int8GemvMatchesReference the int8 ones.)
  e2e='Tiny/CudaForward.MatchesReference/tiny_qwen2_Q4_0*:Tiny/CudaForward.MatchesReference/tiny_gemma3_Q4_K_M*:CudaForward.Int8GemvMatchesReference'
  timeout 200 compute-sanitizer --tool memcheck "$build/tests/minfer_model_test" \
    --gtest_filter="$e2e" > "$out/memcheck_e2e.log" 2>&1 || rc=1
  grep "ERROR SUMMARY" "$out/memcheck_e2e.log"
  # Racecheck end to end: one prefill (14-token prompt: tiled GEMM, flash
  # attention) and four decode steps (fused int8 kernels, split-KV attention:
  # the cache holds 1024 rows; graph capture and replay) of a two-layer model
  # of Qwen2.5-0.5B's shapes. Racecheck slows the kernels ~1000x: the bounded
  # wait is raised (a 14-token prefill takes ~50 s under it).
  small=$build/qwen2.5-0.5b-2layers-Q4_0.gguf
  "$build/minfer" synth --model qwen2.5-0.5b --layers 2 -q Q4_0 "${tok[@]}" -o "$small" -s
  echo "The capital of France is a city that many people visit every year" > "$build/prompt14.txt"
  MINFER_GPU_TIMEOUT=280 timeout 300 compute-sanitizer --tool racecheck "$build/minfer" run \
    -m "$small" -f "$build/prompt14.txt" -n 4 --temp 0 -c 1024 > "$out/racecheck_e2e.log" 2>&1 ||
    rc=1
  grep "RACECHECK SUMMARY" "$out/racecheck_e2e.log"
fi
exit $rc
