#!/bin/bash
# GPU path vs CPU path perplexity on #3's synthetic models, on a machine with
# an NVIDIA GPU: prints ln PPL of each and their difference (the GPU path must
# stay within 0.01). Run after tools/cuda_test.sh has built BUILD_DIR.
#   bash tools/cuda_ppl.sh BUILD_DIR [DEPS_PREFIX] [CHUNKS]
set -u
cd "$(dirname "$0")/.."
build=$1
deps=${2:-}
chunks=${3:-10}
tok=()
[ -n "$deps" ] && [ -d "$deps/qwen2-tokenizer" ] && tok=(--tokenizer-dir "$deps/qwen2-tokenizer")
ppl() {  # prints the final PPL of `minfer perplexity`
  "$@" -f tests/data/text.txt -c 512 --chunks "$chunks" 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'
}
rc=0
for spec in qwen2.5-0.5b:Q4_0 qwen2.5-0.5b:Q8_0 qwen3-0.6b:Q8_0 qwen3-0.6b:Q4_K; do
  shape=${spec%%:*}
  q=${spec##*:}
  model=$build/$shape-$q.gguf
  [ -f "$model" ] || "$build/minfer" synth --model "$shape" -q "$q" "${tok[@]}" -o "$model" -s ||
    { rc=1; continue; }
  gpu=$(ppl "$build/minfer" perplexity -m "$model")
  cpu=$(MINFER_DISABLE_CUDA=1 ppl "$build/minfer" perplexity -m "$model")
  python3 - "$shape" "$q" "$gpu" "$cpu" <<'PY' || rc=1
import math, sys
shape, q, gpu, cpu = sys.argv[1:5]
d = math.log(float(gpu)) - math.log(float(cpu))
print(f"{shape} {q}: PPL gpu {gpu} cpu {cpu}  delta ln PPL {d:+.5f}  {'ok' if abs(d) <= 0.01 else 'FAIL'}")
sys.exit(0 if abs(d) <= 0.01 else 1)
PY
done
exit $rc
