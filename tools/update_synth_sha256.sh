#!/usr/bin/env bash
# Records the sha256 of a few synthetic models in tests/synth/synth_sha256.txt.
# The test Synth.BytesMatchRecordedDigests regenerates them and compares: a
# mismatch means `minfer synth` output changed. Run this only when that change
# is deliberate, and say why in the commit. usage: tools/update_synth_sha256.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
minfer=${1:-build}/minfer
out=tests/synth/synth_sha256.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "# sha256 shape quant (seed 7) — written by tools/update_synth_sha256.sh"
  for spec in "tiny-qwen2 Q4_K_M" "tiny-qwen3 Q8_0" "tiny-llama Q4_0" "tiny-gemma3 Q6_K" "tiny-qwen2 F16" \
              "tiny-qwen3moe Q4_K_M"; do
    set -- $spec
    "$minfer" synth --model "$1" -q "$2" --seed 7 -s -o "$tmp/m.gguf"
    echo "$(sha256sum "$tmp/m.gguf" | cut -c1-64) $1 $2"
  done
} > "$out"
cat "$out"
