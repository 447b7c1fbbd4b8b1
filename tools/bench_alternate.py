#!/usr/bin/env python3
"""minfer bench and a llama-bench binary on one GGUF file, alternating run by run
(ours, theirs, ours, ...; each run -r 1) so that both see the same machine load;
prints, per test, the best and the median t/s of each. On a shared machine
whose load changes minute by minute, the best of several alternating runs is
the steadiest ratio (docs/PERFORMANCE.md).

  python3 tools/bench_alternate.py --minfer BUILD/minfer --llama-bench PATH \\
      --rounds 4 -m FILE -- -p 512 -n 128 -t 2

--base OTHER/minfer adds an earlier minfer build to the rotation (before and
after a change, in the same load as the peer).
"""
import argparse
import re
import statistics
import subprocess
import sys

ROW = re.compile(r"\|\s*((?:pp|tg)\d+)\s*\|\s*([\d.]+)\s*±")


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return [(m.group(1), float(m.group(2))) for m in map(ROW.search, proc.stdout.splitlines()) if m]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minfer", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--base", help="an earlier minfer build, run in the same rotation")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("flags", nargs="*", help="test flags for both, e.g. -p 512 -n 128 -t 2")
    a = ap.parse_args()
    contenders = [("minfer", [a.minfer, "bench"]), ("llama.cpp", [a.llama_bench])]
    if a.base:
        contenders.insert(1, ("base", [a.base, "bench"]))
    results = {}
    for _ in range(a.rounds):
        for name, binary in contenders:
            for test, tps in run(binary + ["-m", a.model, *a.flags, "-r", "1"]):
                results.setdefault(test, {}).setdefault(name, []).append(tps)
    for test, by in sorted(results.items()):
        line = [test]
        for name, _ in contenders:
            v = by.get(name, [])
            if v:
                line.append(f"{name} best {max(v):.2f} median {statistics.median(v):.2f} "
                            f"({' '.join(f'{x:.1f}' for x in v)})")
        if "minfer" in by and "llama.cpp" in by:
            line.append(f"ratio best {max(by['minfer']) / max(by['llama.cpp']):.2f} median "
                        f"{statistics.median(by['minfer']) / statistics.median(by['llama.cpp']):.2f}")
        if "minfer" in by and "base" in by:
            line.append(f"vs base best {max(by['minfer']) / max(by['base']):.2f}")
        print(" | ".join(line))


if __name__ == "__main__":
    main()
