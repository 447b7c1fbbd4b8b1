#!/usr/bin/env bash
# Builds minfer with warnings as errors and runs every test: unit tests, the
# checks against independent references (the gguf Python package, llama.cpp
# goldens), the parity tests on the real Gemma 3 270M, and the bounded fuzz runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
MINFER_GEMMA3_GGUF=$(bash tools/gemma3_path.sh)
export MINFER_GEMMA3_GGUF
build=${MINFER_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release -DMINFER_WERROR=ON
cmake --build "$build" -j"$(nproc)"
# The CPU kernels cross-built for AArch64 and tested under qemu (NEON paths).
MINFER_AARCH64_BUILD_DIR="$build-aarch64" bash tools/aarch64_test.sh
cd "$build"
ctest --output-on-failure -j"$(nproc)" "$@"
