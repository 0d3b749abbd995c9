#!/usr/bin/env python3
"""Soft-mode overhead: wall time and peak memory of each workload natively and under soft mode,
same run, interleaved.

  native: build/workloads/native/wl_<name> SCALE
  soft:   build/bin/whymiss record --mode soft -o TMP/s.data [--period-us N] -- <same>
  memory: <same> with the runtime preloaded as `whymiss record` does it (LD_PRELOAD,
          WHYMISS_OUTPUT, WHYMISS_MODE=soft), so that the peak RSS is the program's own

Time is the wall time of `whymiss record` (start-up, sampling and the profile written and
rewritten; the report is excluded). Peak RSS comes from GNU time (`/usr/bin/time -f %M`, Debian
package `time`): its child is forked from a small process, so the figure is the program's own,
not inherited from the Python process that starts it (a child forked from Python starts with
Python's high-water mark). Scales make every workload run >= 2 s natively on this machine. Each
row is the median of --reps (default 3) repetitions. Prints one markdown table with the
geometric-mean time overhead. Exits 1 when the geometric mean exceeds --target (default 10 %), 2
on a setup error or a failing run.

  bench/soft_overhead.py [--build build] [--reps 3] [--target 0.10] [--period-us N] [name[=scale] ...]
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT = [
    ("false_sharing_app", 2500), ("false_sharing_alloc", 2500), ("true_sharing", 150),
    ("conflict_app", 800), ("conflict_alloc", 800), ("capacity", 700), ("control", 900),
]


def run(cmd, timeout, env=None):
    """Wall seconds, CPU seconds (user + system, children included) and peak RSS (KiB) of one
    command, measured by GNU time."""
    r = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.stderr.write(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}\n")
        sys.exit(2)
    secs, user, system, rss = r.stderr.strip().splitlines()[-1].split()
    return float(secs), float(user) + float(system), int(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.10)
    ap.add_argument("--period-us", type=int)
    ap.add_argument("workloads", nargs="*")
    a = ap.parse_args()
    work = [(w.split("=")[0], int(w.split("=")[1]) if "=" in w else dict(DEFAULT).get(w, 1000))
            for w in a.workloads] or DEFAULT
    whymiss = os.path.join(a.build, "bin", "whymiss")
    native_dir = os.path.join(a.build, "workloads", "native")
    for path in ["/usr/bin/time", whymiss] + [os.path.join(native_dir, "wl_" + n) for n, _ in work]:
        if not os.access(path, os.X_OK):
            sys.stderr.write(f"missing {path}: build first (scripts/build.sh)\n")
            return 2
    times = {n: ([], []) for n, _ in work}
    cpu = {n: ([], []) for n, _ in work}
    mem = {n: ([], []) for n, _ in work}
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "s.data")
        extra = ["--period-us", str(a.period_us)] if a.period_us else []
        preload = {"LD_PRELOAD": os.path.abspath(os.path.join(a.build, "lib", "libwhymiss-soft.so")),
                   "WHYMISS_OUTPUT": os.path.join(tmp, "m.data"), "WHYMISS_MODE": "soft"}
        if a.period_us:
            preload["WHYMISS_PERIOD_US"] = str(a.period_us)
        for _ in range(a.reps):
            for n, scale in work:
                prog = [os.path.join(native_dir, "wl_" + n), str(scale)]
                t, c, m = run(prog, 600)
                times[n][0].append(t)
                cpu[n][0].append(c)
                mem[n][0].append(m)
                t, c, _ = run([whymiss, "record", "--mode", "soft", "-o", prof] + extra + ["--"] + prog, 600)
                times[n][1].append(t)
                cpu[n][1].append(c)
                _, _, m = run(prog, 600, preload)
                mem[n][1].append(m)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"soft-mode overhead, {a.reps} reps, median; load average after: {load}\n")
    print("| workload | scale | native s | soft s | time overhead | CPU overhead | native MiB | soft MiB | memory overhead |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    logs, cpu_logs = [], []
    for n, scale in work:
        tn, ts = statistics.median(times[n][0]), statistics.median(times[n][1])
        cn, cs = statistics.median(cpu[n][0]), statistics.median(cpu[n][1])
        mn, ms = statistics.median(mem[n][0]) / 1024, statistics.median(mem[n][1]) / 1024
        logs.append(math.log(ts / tn))
        cpu_logs.append(math.log(cs / cn))
        print(f"| {n} | {scale} | {tn:.2f} | {ts:.2f} | {100 * (ts / tn - 1):+.1f} % | "
              f"{100 * (cs / cn - 1):+.1f} % | {mn:.1f} | {ms:.1f} | "
              f"{100 * (ms / mn - 1):+.0f} % (+{ms - mn:.1f} MiB) |")
    geo = math.exp(sum(logs) / len(logs)) - 1
    cpu_geo = math.exp(sum(cpu_logs) / len(cpu_logs)) - 1
    print(f"\ngeometric-mean time overhead: {100 * geo:+.1f} % (target <= {100 * a.target:.0f} %); "
          f"CPU time (user + system, less sensitive to other load): {100 * cpu_geo:+.1f} %")
    return 0 if geo <= a.target else 1


if __name__ == "__main__":
    sys.exit(main())
