#!/usr/bin/env python3
"""What soft mode's pthread mutex hooks (src/runtime/soft/lock_hooks.cpp) cost: a loop of
uncontended lock/unlock pairs (bench/lock_loop.c, built here with the system compiler) natively
and under `whymiss record --mode soft`, interleaved, --reps times; prints the medians of CPU time
(user + system) and the cost per pair. The whole of soft mode's overhead is in the figure
(sampling and trace windows too, ~0.3 s on a 3 s run here), so it bounds the hooks' cost.

  bench/soft_lock_cost.py [--build build] [--reps 3] [--pairs 500000000]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu(cmd):
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"soft_lock_cost.py: {' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1:]}")
    u, s = r.stderr.strip().splitlines()[-1].split()
    return float(u) + float(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=500_000_000)
    a = ap.parse_args()
    whymiss = os.path.join(a.build, "bin", "whymiss")
    if not os.access(whymiss, os.X_OK):
        sys.exit(f"soft_lock_cost.py: {whymiss} not found (build first: scripts/build.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, "lock_loop")
        subprocess.run(["cc", "-O2", "-pthread", os.path.join(REPO, "bench", "lock_loop.c"), "-o", prog],
                       check=True)
        native, soft = [], []
        for i in range(a.reps):
            native.append(cpu([prog, str(a.pairs)]))
            soft.append(cpu([whymiss, "record", "--mode", "soft", "-o", os.path.join(tmp, f"s{i}.data"),
                             "--", prog, str(a.pairs)]))
    n, s = statistics.median(native), statistics.median(soft)
    print(f"lock/unlock pairs: {a.pairs:,}; CPU s (median of {a.reps}): native {n:.2f}, soft {s:.2f} "
          f"(+{(s / n - 1) * 100:.0f} %, {(s - n) / a.pairs * 1e9:.2f} ns a pair)")


if __name__ == "__main__":
    main()
