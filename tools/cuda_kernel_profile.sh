#!/bin/bash
# Per-kernel GPU times of a few decode steps under Nsight Compute (ncu), summed
# by kernel name: the decode profile of docs/PERFORMANCE.md.
#   bash tools/cuda_kernel_profile.sh MINFER_BINARY MODEL [OUT_DIR [MINFER_ARGS...]]
# MINFER_ARGS replace the default `run -m MODEL -n 4 --temp 0 -p Hello`, e.g.
# `batched-bench -m MODEL -npp 4 -ntg 3 -npl 64` for batched decode steps.
set -u
bin=$1
model=$2
out=${3:-.}
shift $(($# < 3 ? $# : 3))
args=("$@")
((${#args[@]})) || args=(run -m "$model" -n 4 --temp 0 -p "Hello")
command -v ncu > /dev/null || { echo "ncu not found"; exit 0; }
ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  "$bin" "${args[@]}" > "$out/ncu.csv" 2> "$out/ncu.err"
python3 - "$out/ncu.csv" <<'PY'
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, vi = head.index("Kernel Name"), head.index("Metric Value")
tot, cnt = collections.Counter(), collections.Counter()
for r in rows[1:]:
    name = r[ki].split("<")[0].split("(")[0]
    tot[name] += float(r[vi].replace(",", "")) / 1e3  # ns -> us
    cnt[name] += 1
all_us = sum(tot.values())
print(f"kernels: {sum(cnt.values())}, GPU time {all_us:.1f} us")
for k, v in tot.most_common(14):
    print(f"  {k:32s} {cnt[k]:5d} x {v / cnt[k]:7.2f} us = {v:8.1f} us {100 * v / all_us:5.1f}%")
PY
