#!/bin/bash
# Decode speed of a Qwen2.5-7B-shaped Q4_K_M file against a pure Q4_K one, on
# one GPU, for one or more minfer binaries (e.g. a baseline build and this
# one, measured in the same session): tg128 by `minfer bench`, then each int8
# GEMV kernel's mean GPU time (Nsight Compute, gpu__time_duration, clocks left
# alone) over the launches of a short `minfer run`, per (kernel, grid size).
#   bash tools/cuda_q4km_bench.sh MINFER_BINARY [MINFER_BINARY ...]
# MODELS_DIR (default /tmp/q4km_models) keeps the two synthetic files (~9 GB);
# TOKENIZER_DIR, a Qwen2 tokenizer folder for synth (docs/CUDA.md). Output on
# stdout; ncu's raw CSVs under $OUT (default MODELS_DIR).
set -u
[ $# -ge 1 ] || { echo "usage: $0 MINFER_BINARY [MINFER_BINARY ...]"; exit 2; }
models=${MODELS_DIR:-/tmp/q4km_models}
out=${OUT:-$models}
mkdir -p "$models" "$out"
tok=()
[ -n "${TOKENIZER_DIR:-}" ] && tok=(--tokenizer-dir "$TOKENIZER_DIR")
for q in Q4_K_M Q4_K; do
  f=$models/qwen2.5-7b-$q.gguf
  [ -f "$f" ] || "$1" synth --model qwen2.5-7b -q "$q" "${tok[@]}" -o "$f" -s &
done
wait
for q in Q4_K_M Q4_K; do
  for bin in "$@"; do
    echo "== $bin, 7B $q"
    "$bin" bench -m "$models/qwen2.5-7b-$q.gguf" -p 32 -n 128 -r 3 2>&1 | grep -E "tg128|rror"
  done
done
command -v ncu > /dev/null || { echo "ncu not found: no kernel times"; exit 0; }
i=0
for q in Q4_K_M Q4_K; do
  for bin in "$@"; do
    i=$((i + 1))
    csv=$out/ncu_$i.csv
    ncu --clock-control none --metrics gpu__time_duration.sum -k regex:q8_kernel --csv \
      --page raw "$bin" run -m "$models/qwen2.5-7b-$q.gguf" -n ${NCU_TOKENS:-2} --temp 0 -p "Hello" \
      > "$csv" 2> "$csv.err" || tail -3 "$csv.err"
    echo "== kernel times: $bin, 7B $q (mean over launches)"
    python3 - "$csv" << 'EOF'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
r = list(csv.DictReader(rows))
if not r:
    print("  no kernels profiled"); sys.exit(0)
unit = r[0].get("gpu__time_duration.sum", "")
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1e-3)
acc = collections.defaultdict(list)
for x in r[1:]:
    name = x["Kernel Name"]
    k = name.find(">(")
    name = name[:k + 1] if k >= 0 else name.split("(")[0]
    for a, b in (("void ", ""), ("minfer::cuda::", ""), ("(anonymous namespace)::", ""),
                 ("(minfer::quant::TensorType)12", "Q4_K"), ("(minfer::quant::TensorType)14", "Q6_K"),
                 ("minfer::quant::TensorType::", "")):
        name = name.replace(a, b)
    acc[(name, x.get("Grid Size", ""))].append(float(x["gpu__time_duration.sum"].replace(",", "")) * scale)
for (name, grid), v in sorted(acc.items(), key=lambda kv: -sum(kv[1])):
    print(f"  {len(v):4d} x {sum(v) / len(v):8.2f} us  grid {grid:>14}  {name[:110]}")
EOF
  done
done
