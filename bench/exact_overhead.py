#!/usr/bin/env python3
"""Exact-mode slowdown: wall time of each workload natively, under `whymiss record --mode exact`
(the profile write included, the report excluded) and under cachegrind.

  native:     build/workloads/native/wl_<name> SCALE
  exact:      build/bin/whymiss record --mode exact -o TMP/x.data -- build/workloads/exact-gcc/<name> SCALE
  cachegrind: valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 --LL=33554432,16,64
                --cachegrind-out-file=/dev/null build/workloads/native/wl_<name> SCALE

The three are run interleaved (rep 1 of every workload and every tool, then rep 2, ...); the table
shows the median of --reps (default 3) repetitions. Exact mode and cachegrind also run each workload
at scale 1, so that the table can show a second ratio without either tool's fixed cost (start-up,
the exit-time profile write): (exact(S) - exact(1)) / (cachegrind(S) - cachegrind(1)), the cost
of the same extra work. The last column divides the two tools' fastest runs: this VM's speed
varies up to 2x between runs, and such noise only ever adds time. Cachegrind starts in about 0.3 s; at small scales that start-up, not the
simulation, decides the one-run ratio. Prints the machine, the load average before and
after, and one markdown table. Exits 1 if exact mode is slower than cachegrind on any workload
(the team's target), 2 on a setup error or a failing run.

  bench/exact_overhead.py [--build build] [--reps 3] [--cache SPEC] [--miss-heavy] [name[=scale] ...]

--cache passes a geometry to `whymiss record` (default: none, i.e. the detected hierarchy).
--miss-heavy runs the programs that miss on most accesses instead of the default list:
capacity, conflict_app, conflict_alloc and the access-pattern programs pattern_pointer_chase and
pattern_random_lookup (tests/integration/patterns/; exact build in build/workloads/patterns/,
native one in build/workloads/native/pattern_<name>). Any `pattern_<name>` can be named.
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from timing import CACHEGRIND, cpu_model, loadavg, timed

# Scales: native >= ~0.2 s for the single-threaded programs with exact mode under ~60 s; the
# sharing programs at 10 (at 1 cachegrind's start-up was most of its time; see bench/README.md).
DEFAULT = [
    ("false_sharing_app", 10), ("false_sharing_app_fixed", 10),
    ("false_sharing_alloc", 10), ("false_sharing_alloc_fixed", 10),
    ("true_sharing", 10), ("true_sharing_fixed", 10),
    ("conflict_app", 65), ("conflict_app_fixed", 220),
    ("conflict_alloc", 75), ("conflict_alloc_fixed", 85),
    ("capacity", 50), ("capacity_fixed", 60),
    ("control", 85),
]
# --miss-heavy (issue #21's "miss-heavy workloads"). pointer_chase at 100 runs ~0.15 s natively;
# random_lookup at 200 only ~0.04 s natively but ~1.2 s in cachegrind and ~13 s in exact mode
# (2026-11-27): more would make the three reps of this list take over ten minutes.
MISS_HEAVY = [("capacity", 50), ("conflict_app", 65), ("conflict_alloc", 75),
              ("pattern_pointer_chase", 100), ("pattern_random_lookup", 200)]


def programs(build, name):
    """(native, exact) builds of a workload: tests/workloads/ ones or pattern_<name>."""
    if name.startswith("pattern_"):
        return (os.path.join(build, "workloads", "native", name),
                os.path.join(build, "workloads", "patterns", name[len("pattern_"):]))
    return (os.path.join(build, "workloads", "native", "wl_" + name),
            os.path.join(build, "workloads", "exact-gcc", name))



def marginal(t, scale):
    """(exact(S) - exact(1)) / (cachegrind(S) - cachegrind(1)) from the medians, or why not."""
    if scale == 1:
        return "-"
    de = statistics.median(t["exact"]) - statistics.median(t["exact1"])
    dc = statistics.median(t["cachegrind"]) - statistics.median(t["cachegrind1"])
    if dc < 0.05:  # cachegrind's extra work is below the runs' spread: no ratio worth printing
        return f"n/a (cachegrind +{dc:.2f}s)"
    return f"{de / dc:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cache", help="geometry for whymiss record (default: detected)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--miss-heavy", action="store_true", help="the miss-heavy list instead of the default one")
    ap.add_argument("workloads", nargs="*", help="name or name=scale (default: all, with their scales)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.workloads:
        scales = dict(DEFAULT + MISS_HEAVY)
        wl = []
        for w in args.workloads:
            name, _, s = w.partition("=")
            wl.append((name, int(s) if s else scales.get(name, 1)))
    else:
        wl = MISS_HEAVY if args.miss_heavy else DEFAULT
    if shutil.which("valgrind") is None:
        sys.stderr.write("valgrind not found\n")
        return 2
    tmp = tempfile.TemporaryDirectory(prefix="whymiss-overhead.")
    prof = os.path.join(tmp.name, "x.data")
    cache = ["--cache", args.cache] if args.cache else []
    # Snapshot the binaries and the runtime library: other people may rebuild build/ while this
    # runs. The exact builds find libwhymiss-rt.so through RUNPATH, which LD_LIBRARY_PATH overrides.
    snap = os.path.join(tmp.name, "snap")
    os.makedirs(snap)
    rt = os.path.join(build, "lib", "libwhymiss-rt.so")
    whymiss = os.path.join(snap, "whymiss")
    try:
        shutil.copy2(os.path.join(build, "bin", "whymiss"), whymiss)
        shutil.copy2(rt, os.path.join(snap, "libwhymiss-rt.so"))
    except OSError as e:
        sys.stderr.write(f"{e} (cmake --build {args.build})\n")
        return 2
    os.environ["LD_LIBRARY_PATH"] = snap + (":" + os.environ["LD_LIBRARY_PATH"]
                                            if os.environ.get("LD_LIBRARY_PATH") else "")
    rt_time = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(rt)))

    cmds = {}
    for name, scale in wl:
        for p in programs(build, name):
            if not os.access(p, os.X_OK):
                sys.stderr.write(f"missing {p} (cmake --build {args.build})\n")
                return 2
        native = os.path.join(snap, "native_" + name)
        exact = os.path.join(snap, "exact_" + name)
        shutil.copy2(programs(build, name)[0], native)
        shutil.copy2(programs(build, name)[1], exact)
        cmds[name] = {
            "native": [native, str(scale)],
            "exact": [whymiss, "record", "--mode", "exact", *cache, "-o", prof, "--", exact, str(scale)],
            "cachegrind": CACHEGRIND + [native, str(scale)],
            "exact1": [whymiss, "record", "--mode", "exact", *cache, "-o", prof, "--", exact, "1"],
            "cachegrind1": CACHEGRIND + [native, "1"],
        }

    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}")
    try:
        head = subprocess.run(["git", "-C", os.path.join(here, ".."), "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", os.path.join(here, ".."), "status", "--porcelain", "--",
                                "src/runtime", "src/sim"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except OSError:
        head, dirty = "?", ""
    print(f"source: git {head}{' + uncommitted changes in src/runtime or src/sim' if dirty else ''}; "
          f"libwhymiss-rt.so built {rt_time} (copied before the runs)")
    print(f"load average before: {loadavg()}")
    tools = ("native", "exact", "cachegrind", "exact1", "cachegrind1")
    times = {name: {k: [] for k in tools} for name, _ in wl}
    loads = []
    for rep in range(args.reps):
        for name, scale in wl:
            for tool in tools:
                if tool.endswith("1") and scale == 1:
                    continue
                times[name][tool].append(timed(cmds[name][tool], args.timeout))
            loads.append(loadavg().split()[0])
            sys.stderr.write(f"rep {rep + 1}/{args.reps} {name}: "
                             + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times[name].items() if v)
                             + f" (load {loads[-1]})\n")
    print(f"load average after: {loadavg()}; 1-min load sampled after each workload: "
          f"min {min(map(float, loads)):.2f}, max {max(map(float, loads)):.2f}")
    print(f"median of {args.reps} interleaved runs; exact = `whymiss record --mode exact"
          f"{' --cache ' + args.cache if args.cache else ''}` (profile written, no report)\n")
    print("| workload | scale | native s | exact s | cachegrind s | exact/native | exact/cachegrind "
          "| same, beyond scale 1 | fastest/fastest |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    slower = []
    for name, scale in wl:
        n, e, c = (statistics.median(times[name][k]) for k in ("native", "exact", "cachegrind"))
        if e > c:
            slower.append(name)
        print(f"| `{name}` | {scale} | {n:.3f} | {e:.2f} | {c:.2f} | {e / n:.0f}x | "
              f"{'**' if e > c else ''}{e / c:.2f}{'**' if e > c else ''} | "
              f"{marginal(times[name], scale)} | "
              f"{min(times[name]['exact']) / min(times[name]['cachegrind']):.2f} |")
    print()
    if slower:
        print("exact mode slower than cachegrind on: " + ", ".join(slower))
    else:
        print("exact mode no slower than cachegrind on every workload")
    tmp.cleanup()
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
