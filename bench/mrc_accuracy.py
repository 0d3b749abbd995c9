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
                        [--curve main|half] [--half all,sampled,0]

--curve half checks the curve at half the simulated line (JSON mrc_other_lines) against direct
runs with lines of that size (`--cache L1=SIZE:SIZE/32:32` at 64-byte lines), once per
WHYMISS_MRC_HALF value given with --half; --half also adds a CPU-time column per value (the whole
tracker with that half-line stack, against WHYMISS_MRC=0), so that the half-line stack's own cost
is the difference between the columns "half=all" (or "sampled") and "half=0".

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


def curve_of(rep, which):
    """The report's curve: the simulated line's ("main"), or the one at half its line ("half")."""
    mrc = rep.get("mrc")
    if which == "main" or not mrc:
        return mrc
    return next((m for m in rep.get("mrc_other_lines", []) if m["line"] == mrc["line"] // 2), None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="2K,4K,8K,16K,32K,64K,128K,256K")
    ap.add_argument("--mrc", default="", help="WHYMISS_MRC for the curve runs (default: the runtime's)")
    ap.add_argument("--curve", choices=["main", "half"], default="main",
                    help="the curve checked: the simulated line's, or the one at half the line "
                         "(against direct runs with lines of that size)")
    ap.add_argument("--half", default="",
                    help="comma-separated WHYMISS_MRC_HALF values: with --curve half, the accuracy "
                         "of each; in any case, the cost of each as an extra column")
    a = ap.parse_args()
    whymiss = os.path.join(a.build, "bin", "whymiss")
    sizes = [size_of(s) for s in a.sizes.split(",")]
    halves = [h for h in a.half.split(",") if h]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {cpu}, {os.cpu_count()} vCPUs, {platform.release()}; commit {commit}, "
          f"{time.strftime('%Y-%m-%d')}; load before {os.getloadavg()[0]:.2f}")
    print(f"sizes: {', '.join(str(s >> 10) + 'K' for s in sizes)}; curve: {a.curve}"
          + (f"; WHYMISS_MRC_HALF: {', '.join(halves)}" if halves else "") + "\n")
    base = dict(os.environ, WHYMISS_MRC=a.mrc) if a.mrc else dict(os.environ)
    # The curves checked: the default runtime's, or one per WHYMISS_MRC_HALF value.
    curves = [(f"half={h}", dict(base, WHYMISS_MRC_HALF=h)) for h in halves if h != "0"] \
        if a.curve == "half" and halves else [("", base)]
    # The configurations timed against WHYMISS_MRC=0: the default, or one per WHYMISS_MRC_HALF value.
    timed = [(f"half={h}", dict(base, WHYMISS_MRC_HALF=h)) for h in halves] or [("on", base)]
    head = "| program |"
    for label, _ in curves:
        sfx = f" ({label})" if label else ""
        head += f" curve{sfx} | mean abs error{sfx} | max abs error{sfx} |"
    for label, _ in timed:
        head += f" CPU time, {'tracker on' if label == 'on' else label} / off |"
    head += f" wall time, {'on' if timed[0][0] == 'on' else timed[0][0]} / off |"
    print(head)
    print("|---|" + "---|---:|---:|" * len(curves) + "---:|" * len(timed) + "---:|")
    all_err = [[] for _ in curves]
    cpu_sum = [0.0 for _ in timed]
    cpu_off_sum = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for rel, args in PROGRAMS:
            prog = os.path.join(a.build, rel)
            found = []
            for _, env in curves:
                rep, _ = record(whymiss, prog, args, tmp, env=env)
                m = curve_of(rep, a.curve)
                if m is None:
                    sys.exit(f"{rel}: the report has no {a.curve} curve")
                found.append(m)
            line = found[0]["line"]
            direct = []
            for s in sizes:
                d, _ = record(whymiss, prog, args, tmp, cache=f"L1={s}:{s // line}:{line}")
                lv = d["totals"]["levels"][0]
                direct.append(lv["misses"] / lv["accesses"])
            row = f"| {os.path.basename(prog)} |"
            for i, m in enumerate(found):
                points = {p["size"]: p["miss_ratio"] for p in m["points"]}
                errs = [abs(direct[k] - points[s]) for k, s in enumerate(sizes)]
                all_err[i] += errs
                row += f" {m['how']} | {statistics.mean(errs):.5f} | {max(errs):.5f} |"
            runs = [[] for _ in timed]
            off = []
            env_off = dict(os.environ, WHYMISS_MRC="0")
            for _ in range(a.reps):  # interleaved
                for k, (_, env) in enumerate(timed):
                    runs[k].append(record(whymiss, prog, args, tmp, env=env)[1])
                off.append(record(whymiss, prog, args, tmp, env=env_off)[1])
            coff = statistics.median(c for c, _ in off)
            woff = statistics.median(w for _, w in off)
            cpu_off_sum += coff
            for k, r in enumerate(runs):
                con = statistics.median(c for c, _ in r)
                cpu_sum[k] += con
                row += f" {con:.2f} s / {coff:.2f} s = {con / coff:.2f} |"
            won = statistics.median(w for _, w in runs[0])
            row += f" {won:.2f} s / {woff:.2f} s = {won / woff:.2f} |"
            print(row, flush=True)
    for (label, _), errs in zip(curves, all_err):
        print(f"\noverall mean absolute error{' (' + label + ')' if label else ''}: {statistics.mean(errs):.5f} "
              f"over {len(errs)} points; max {max(errs):.5f}", end="")
    print()
    for (label, _), c in zip(timed, cpu_sum):
        print(f"CPU time over all programs, {'tracker on' if label == 'on' else label}: "
              f"{c:.2f} s / {cpu_off_sum:.2f} s = {c / cpu_off_sum:.3f}")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
