#!/usr/bin/env python3
"""Exact mode's miss-ratio curve: its accuracy against direct simulation, and its cost.

For each program: one `whymiss record` with the detected cache gives the curve (JSON "mrc",
fully-associative LRU, from reuse distances); then, for each size, a `whymiss record --cache
L1=SIZE:SIZE/64:64` (one fully-associative level) gives the direct miss ratio. The table shows
the mean and largest absolute error per program and how the curve was obtained (counted, or
sampled when the footprint passed the tracker's bound). Cost: the same `whymiss record` with the
tracker on and with WHYMISS_MRC=0, interleaved, --reps times; medians of CPU time (user + system
of `whymiss record` and the program, from the children's rusage: less sensitive than wall time to
other work on the machine) and of wall time. The CPU ratio minus one is the curve's share of
exact mode's time.

  bench/mrc_accuracy.py [--build build] [--reps 5] [--sizes 2K,4K,...] [--mrc all|sampled]

Prints the machine, one markdown table, the overall mean absolute error, and the cost over all
programs (sum of the CPU-time medians with / without).
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAMS = [  # (path under the build directory, arguments)
    ("workloads/exact-gcc/capacity", []),
    ("workloads/exact-gcc/conflict_app", []),
    ("workloads/exact-gcc/conflict_alloc", []),
    ("workloads/exact-gcc/conflict_stride_heap", []),
    ("workloads/exact-gcc/control", []),
    ("workloads/patterns/column_walk", []),
    ("workloads/patterns/pointer_chase", []),
    ("workloads/patterns/random_lookup", []),
]


def size_of(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20}.get(s[-1], 1)
    return int(s[:-1] if s[-1] in "KM" else s) * mult


def record(whymiss, prog, args, tmp, cache=None, env=None):
    prof, rep = os.path.join(tmp, "p.data"), os.path.join(tmp, "r.json")
    for f in (prof, rep):
        if os.path.exists(f):
            os.unlink(f)
    cmd = [whymiss, "record", "-o", prof] + (["--cache", cache] if cache else []) + ["--", prog] + args
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    dt = time.perf_counter() - t0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}: {r.stderr.strip()}")
    subprocess.run([whymiss, "report", "-i", prof, "--format", "json", "--output", rep], check=True)
    return json.load(open(rep)), (cpu, dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="2K,4K,8K,16K,32K,64K,96K,128K")
    ap.add_argument("--mrc", default="", help="WHYMISS_MRC for the curve runs (default: the runtime's)")
    a = ap.parse_args()
    whymiss = os.path.join(a.build, "bin", "whymiss")
    sizes = [size_of(s) for s in a.sizes.split(",")]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {cpu}, {os.cpu_count()} vCPUs, {platform.release()}; commit {commit}, "
          f"{time.strftime('%Y-%m-%d')}; load before {os.getloadavg()[0]:.2f}")
    print(f"sizes: {', '.join(str(s >> 10) + 'K' for s in sizes)}\n")
    print("| program | curve | mean abs error | max abs error | CPU time, tracker on / off | wall time, on / off |")
    print("|---|---|---:|---:|---:|---:|")
    all_err, cpu_on, cpu_off = [], 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for rel, args in PROGRAMS:
            prog = os.path.join(a.build, rel)
            env_on = dict(os.environ, WHYMISS_MRC=a.mrc) if a.mrc else None
            rep, _ = record(whymiss, prog, args, tmp, env=env_on)
            mrc = rep["mrc"]
            points = {p["size"]: p["miss_ratio"] for p in mrc["points"]}
            errs = []
            for s in sizes:
                direct, _ = record(whymiss, prog, args, tmp, cache=f"L1={s}:{s // mrc['line']}:{mrc['line']}")
                lv = direct["totals"]["levels"][0]
                errs.append(abs(lv["misses"] / lv["accesses"] - points[s]))
            all_err += errs
            on, off = [], []
            env_off = dict(os.environ, WHYMISS_MRC="0")
            for _ in range(a.reps):
                on.append(record(whymiss, prog, args, tmp, env=env_on)[1])
                off.append(record(whymiss, prog, args, tmp, env=env_off)[1])
            con, coff = statistics.median(c for c, _ in on), statistics.median(c for c, _ in off)
            won, woff = statistics.median(w for _, w in on), statistics.median(w for _, w in off)
            cpu_on += con
            cpu_off += coff
            print(f"| {os.path.basename(prog)} | {mrc['how']} | {statistics.mean(errs):.5f} | {max(errs):.5f} | "
                  f"{con:.2f} s / {coff:.2f} s = {con / coff:.2f} | {won:.2f} s / {woff:.2f} s = {won / woff:.2f} |",
                  flush=True)
    print(f"\noverall mean absolute error: {statistics.mean(all_err):.5f} over {len(all_err)} points; "
          f"CPU time over all programs {cpu_on:.2f} s / {cpu_off:.2f} s = {cpu_on / cpu_off:.3f}; "
          f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
