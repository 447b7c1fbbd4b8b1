#!/bin/bash
# Per-kernel GPU time of decode on one GPU, three ways, for one file: the
# one-slot Session (`minfer run`, what `minfer bench` tg times), the engine
# with one sequence (`batched-bench -npl 1`, batch-invariant), and the
# engine with 64 (`-npl 64`). Each is a few steps under Nsight Compute
# (tools/cuda_kernel_profile.sh), summed by kernel name; setting the first
# two side by side shows where one sequence in the engine loses to the
# Session (docs/PERFORMANCE.md, "CUDA batched decode").
#   bash tools/cuda_decode_profile.sh MINFER_BINARY MODEL [OUT_DIR]
set -u
[ $# -ge 2 ] || { echo "usage: $0 MINFER_BINARY MODEL [OUT_DIR]"; exit 2; }
bin=$1 model=$2 out=${3:-.}
here=$(dirname "$0")
for v in session engine1 engine64; do mkdir -p "$out/$v"; done
echo "== one-slot Session, 8 tokens"
bash "$here/cuda_kernel_profile.sh" "$bin" "$model" "$out/session" \
  run -m "$model" -n 8 --temp 0 -p Hello
echo "== engine, one sequence, 8 decode steps"
bash "$here/cuda_kernel_profile.sh" "$bin" "$model" "$out/engine1" \
  batched-bench -m "$model" -npp 1 -ntg 8 -npl 1
echo "== engine, 64 sequences, 4 decode steps"
bash "$here/cuda_kernel_profile.sh" "$bin" "$model" "$out/engine64" \
  batched-bench -m "$model" -npp 1 -ntg 4 -npl 64
rm -f "$out"/*/ncu.csv  # large; the summaries above are what is kept
