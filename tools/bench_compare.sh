#!/bin/bash
# minfer bench and llama.cpp (tools/ref/llama_bench.py) on the same GGUF files,
# alternating run by run (ours, theirs, ...) so both see the same machine load:
# the CPU comparison of docs/PERFORMANCE.md.
#   bash tools/bench_compare.sh BUILD_DIR ROUNDS MODEL... [-- minfer bench flags]
# Defaults: -p 512 -n 128 -r 3 -t 2. Prints each run's pp and tg in t/s.
set -u
cd "$(dirname "$0")/.."
build=$1
rounds=$2
shift 2
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  models+=("$1")
  shift
done
[ "${1:-}" = "--" ] && shift
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(-p 512 -n 128 -r 3 -t 2)
for ((i = 1; i <= rounds; i++)); do
  for m in "${models[@]}"; do
    echo "== round $i $(basename "$m") load $(cut -d' ' -f1 /proc/loadavg)"
    "$build/minfer" bench -m "$m" "${flags[@]}" 2>&1 | grep -E "pp[0-9]|tg[0-9]"
    python3 tools/ref/llama_bench.py "$m" "${flags[@]}" 2>/dev/null |
      python3 -c 'import json,sys,statistics as s
d=json.loads(sys.stdin.read())
for k,v in d.items():
    sd = s.stdev(v) if len(v) > 1 else 0.0
    print(f"llama.cpp {k}: {s.mean(v):.2f} +- {sd:.2f} t/s")'
  done
done
