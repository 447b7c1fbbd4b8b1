#!/bin/bash
# Where one sequence in the engine loses to the one-slot path on a GPU, in one
# call: `minfer bench` tg (one-slot engine, not batch-invariant) against
# `minfer batched-bench -npl 1` with batch invariance on (the default) and off
# (MINFER_BATCH_INVARIANT=0), each with and without CUDA graph replay
# (MINFER_NO_CUDA_GRAPH=1), alternating ROUNDS times; then, when ncu is there,
# the per-kernel profile of the three (tools/cuda_decode_profile.sh) into
# OUT_DIR. Issue 11 asks that one sequence be no slower than `minfer bench`.
#   bash tools/cuda_one_sequence.sh MINFER_BINARY MODEL [OUT_DIR]
# NTG (default 128), ROUNDS (default 2).
set -u
[ $# -ge 2 ] || { echo "usage: $0 MINFER_BINARY MODEL [OUT_DIR]"; exit 2; }
bin=$1 model=$2 out=${3:-}
ntg=${NTG:-128} rounds=${ROUNDS:-2}
here=$(dirname "$0")
tg() { "$bin" bench -m "$model" -p 0 -n "$ntg" -r 3 2>&1 | grep -E "tg$ntg|rror"; }
bb() { "$bin" batched-bench -m "$model" -npp 128 -ntg "$ntg" -npl 1 2>&1 | grep -E "^\|? *[0-9]|rror"; }
for r in $(seq "$rounds"); do
  for graph in 0 1; do
    echo "== round $r, MINFER_NO_CUDA_GRAPH=$graph: bench tg$ntg"
    MINFER_NO_CUDA_GRAPH=$graph tg
    for inv in 1 0; do
      echo "== round $r, MINFER_NO_CUDA_GRAPH=$graph: batched-bench -npl 1, MINFER_BATCH_INVARIANT=$inv"
      MINFER_NO_CUDA_GRAPH=$graph MINFER_BATCH_INVARIANT=$inv bb
    done
  done
done
[ -n "$out" ] && bash "$here/cuda_decode_profile.sh" "$bin" "$model" "$out"
exit 0
