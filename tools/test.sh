#!/usr/bin/env bash
# Builds minfer with warnings as errors and runs every test (unit tests, the
# checks against the `gguf` Python package, and the bounded fuzz runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
build=${MINFER_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release -DMINFER_WERROR=ON
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" "$@"
