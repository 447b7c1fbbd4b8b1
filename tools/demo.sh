#!/usr/bin/env bash
# Builds minfer, writes a synthetic Qwen2.5-0.5B-shape model (real Qwen2
# tokenizer, Q4_0 weights) and inspects it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
build=${MINFER_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target minfer
mkdir -p models
"$build/minfer" synth --model qwen2.5-0.5b --type Q4_0 -o models/qwen2.5-0.5b-q4_0.gguf
"$build/minfer" inspect models/qwen2.5-0.5b-q4_0.gguf
