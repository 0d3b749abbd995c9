#!/usr/bin/env python3
"""The miss-ratio curves' cost on any exact-mode programs (those bench/mrc_accuracy.py does not
pick, e.g. the differential corpus's exact builds, or real programs with their arguments): CPU
time (user + system of `whymiss record` and the program, from the children's rusage) and wall
time of `whymiss record --mode exact --cache CACHE` with each WHYMISS_MRC_HALF value given and
with the tracker off (WHYMISS_MRC=0), interleaved (every configuration of every program, then the
next round), --rounds times, medians. The tracker's stacks run on a worker thread by default;
--inline adds each half value with WHYMISS_MRC_THREAD=0 (applied on the simulating thread, as
before the worker), so the two can be compared in the same run.
Prints one markdown table per time (CPU, wall), one row per program, the geometric mean of each
configuration's ratio and the ratio of the sums of medians (as bench/mrc_accuracy.py reports it).

  bench/mrc_cost.py [--build build] [--rounds 3] [--half all,sampled,0] [--inline]
                    [--cache SPEC] PROGRAM...
  PROGRAM: a path, or a quoted command line ('/tmp/lz4 -f -q -1 in.tar out.lz4')
"""
import argparse
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, env):
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - w0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}: {r.stderr.strip()}")
    return (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--half", default="all,sampled,0")
    ap.add_argument("--inline", action="store_true", help="also each half value with WHYMISS_MRC_THREAD=0")
    ap.add_argument("--cache", default="L1=48K:12:64,L2=1M:16:64,L3=32M:16:64")
    ap.add_argument("programs", nargs="+")
    a = ap.parse_args()
    whymiss = os.path.join(a.build, "bin", "whymiss")
    configs = []
    for h in [h for h in a.half.split(",") if h]:
        configs.append((f"half={h}", dict(os.environ, WHYMISS_MRC_HALF=h)))
        if a.inline:
            configs.append((f"half={h} inline", dict(os.environ, WHYMISS_MRC_HALF=h, WHYMISS_MRC_THREAD="0")))
    configs.append(("off", dict(os.environ, WHYMISS_MRC="0")))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"machine: {cpu}, {os.cpu_count()} vCPUs, {platform.release()}; commit {commit}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load before {os.getloadavg()[0]:.2f}")
    print("command: " + " ".join(shlex.quote(x) for x in sys.argv) + "\n")
    progs = [shlex.split(p) for p in a.programs]
    times = {(i, c): [] for i in range(len(progs)) for c, _ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.data")
        for _ in range(a.rounds):
            for i, p in enumerate(progs):
                for c, env in configs:
                    times[(i, c)].append(timed([whymiss, "record", "--mode", "exact", "--cache", a.cache,
                                                "-o", out, "--", *p], env))
    names = [c for c, _ in configs[:-1]]
    for k, what in ((0, "CPU time"), (1, "wall time")):
        med = {key: statistics.median(v[k] for v in vals) for key, vals in times.items()}
        print(f"{what}:\n")
        print("| program | " + " | ".join(f"{c} / off" for c in names) + " |")
        print("|---|" + "---:|" * len(names))
        logs = {c: [] for c in names}
        for i, p in enumerate(progs):
            off = med[(i, "off")]
            row = f"| {os.path.basename(p[0])}{' ' + ' '.join(p[1:2]) if len(p) > 1 else ''} |"
            for c in names:
                on = med[(i, c)]
                logs[c].append(math.log(on / off))
                row += f" {on:.2f} / {off:.2f} s = {on / off:.2f} |"
            print(row, flush=True)
        off_sum = sum(med[(i, "off")] for i in range(len(progs)))
        print(f"\n{what}, geometric mean: " + ", ".join(f"{c} {math.exp(statistics.mean(v)):.3f}" for c, v in logs.items())
              + "; over all programs (sum of medians): "
              + ", ".join(f"{c} {sum(med[(i, c)] for i in range(len(progs))) / off_sum:.3f}" for c in names) + "\n")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
