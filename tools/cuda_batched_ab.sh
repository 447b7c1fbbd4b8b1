#!/bin/bash
# Batched decode on one GPU, side by side in one session: `minfer
# batched-bench` for each minfer binary given (e.g. a baseline build and this
# one) and, when LLAMA_BATCHED_BENCH names one, llama.cpp's
# llama-batched-bench (-ngl 99 -fa on), alternating ROUNDS times on the same
# synthetic files, written once by the first binary's `minfer synth`.
#   bash tools/cuda_batched_ab.sh MINFER_BINARY [MINFER_BINARY ...]
# MODELS: shape:quant pairs (default "qwen2.5-7b:Q4_K_M"); NPP, NTG, NPL
# (default 128, 32, 1,8,32); ROUNDS (default 2); MODELS_DIR (default
# /tmp/batched_models); TOKENIZER_DIR: a Qwen2 tokenizer folder for synth.
# Output: each run's table rows on stdout.
set -u
[ $# -ge 1 ] || { echo "usage: $0 MINFER_BINARY [MINFER_BINARY ...]"; exit 2; }
models=${MODELS_DIR:-/tmp/batched_models}
npp=${NPP:-128} ntg=${NTG:-32} npl=${NPL:-1,8,32} rounds=${ROUNDS:-2}
mkdir -p "$models"
tok=()
[ -n "${TOKENIZER_DIR:-}" ] && tok=(--tokenizer-dir "$TOKENIZER_DIR")
files=()
for spec in ${MODELS:-qwen2.5-7b:Q4_K_M}; do
  f=$models/${spec%%:*}-${spec##*:}.gguf
  [ -f "$f" ] || "$1" synth --model "${spec%%:*}" -q "${spec##*:}" "${tok[@]}" -o "$f" -s ||
    { echo "synth $spec failed"; exit 1; }
  files+=("$f")
done
max_npl=${npl##*,}
ctx=$(( max_npl * (npp + ntg) + 256 ))
for f in "${files[@]}"; do
  for r in $(seq "$rounds"); do
    for bin in "$@"; do
      echo "== $(basename "$f") round $r: $bin"
      "$bin" batched-bench -m "$f" -npp "$npp" -ntg "$ntg" -npl "$npl" 2>&1 |
        grep -E "^\|? *[0-9]|rror"
    done
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
      echo "== $(basename "$f") round $r: llama-batched-bench"
      "$LLAMA_BATCHED_BENCH" -m "$f" -npp "$npp" -ntg "$ntg" -npl "$npl" -ngl 99 -fa on \
        -c "$ctx" 2>&1 | grep -E "^\|? *[0-9]|rror"
    fi
  done
done
