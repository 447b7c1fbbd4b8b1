#!/usr/bin/env python3
"""Per-launch GPU time from an Nsight Compute CSV, summed by (kernel, grid, block).

Where tools/cuda_kernel_profile.sh sums by kernel name, this keeps launches of
one kernel over different matrices apart (their grids differ), which is what
sets one decode step against another layer by layer (docs/PERFORMANCE.md,
"Where one sequence in the engine loses to the Session").

  ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
      minfer batched-bench -m M -npp 1 -ntg 8 -npl 1 > ncu.csv
  python3 tools/cuda_launch_profile.py ncu.csv [TOP]
"""
import collections
import csv
import sys


def main() -> None:
    rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
    head = rows[0]
    ki, vi = head.index("Kernel Name"), head.index("Metric Value")
    gi, bi = head.index("Grid Size"), head.index("Block Size")
    total, count = collections.Counter(), collections.Counter()
    for r in rows[1:]:
        key = (r[ki].split("(")[0][-60:], r[gi], r[bi])
        total[key] += float(r[vi].replace(",", "")) / 1e3  # ns -> us
        count[key] += 1
    all_us = sum(total.values())
    print(f"kernels {sum(count.values())}, GPU time {all_us:.1f} us")
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 22
    for key, us in total.most_common(top):
        name, grid, block = key
        print(f"  {count[key]:5d} x {us / count[key]:8.2f} us = {us:8.1f} us "
              f"{100 * us / all_us:5.1f}%  {name} grid {grid} block {block}")


if __name__ == "__main__":
    main()
