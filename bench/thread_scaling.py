#!/usr/bin/env python3
"""Thread scaling of exact mode on private work (issue #21): bench/private_threads.c, where each
of N threads sweeps an array of its own (nothing shared), the same work per thread whatever N.

The program is built twice into a temporary folder: natively (`cc -O2 -pthread`) and with
build/bin/whymiss-cc (same flags). For every N (--threads, default 1,2,4,8), interleaved and
--reps times (default 3), wall time of:
  native:  private_threads N PASSES KIB
  exact:   build/bin/whymiss record --mode exact --cache GEOMETRY -o TMP -- private_threads N PASSES KIB
GEOMETRY is --cache (default L1=48K:12:64,L2=1M:16:64,L3=32M:16:64), so that the simulated work
does not depend on the machine. Each exact run is one per variant (--variant LABEL:K=V,K=V,
repeatable; without any, one variant named --label), its K=V set in the environment of
`whymiss record` on top of every --env K=V; variants run one after the other within each rep.

Per N it prints the median and fastest wall time, the ratio to 1 thread (medians and fastest),
exact/native, and what explains the scaling: CPU time (user+sys of the whole run, so the relay
thread included), voluntary context switches (waits that slept: a full ring, the relay idle)
and the report's counted accesses and L1 misses. The relay keeps no statistics of its own in the
profile (solo grants, held hits, pushes): none can be shown. Then a least-squares fit of the
medians, t(N) = a + b*N, over every N and over N >= 2 (1 thread runs solo, without the relay),
with what it predicts at 16 threads; with two variants or more, their medians side by side.
The binaries are copied first (others may rebuild build/).

  bench/thread_scaling.py [--build build] [--threads 1,2,4,8] [--reps 3] [--passes 200] [--kib 64]
                          [--cache SPEC] [--env K=V ...] [--label NAME | --variant LABEL:K=V,... ...]

Exit 0 after a complete run, 2 on a bad argument, a setup error or a failing run.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import cpu_model, loadavg  # noqa: E402

GEOMETRY = "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"


def fail(msg):
    sys.stderr.write(f"thread_scaling: {msg}\n")
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one sentence, exit 2 (argparse would print the usage first)
        fail(message + " (see --help)")


def env_pair(s):
    k, eq, v = s.partition("=")
    if not eq or not k or any(c in k for c in " \t"):
        raise argparse.ArgumentTypeError(f"'{s}' is not K=V")
    return k, v


def variant(s):
    label, _, rest = s.partition(":")
    if not label:
        raise argparse.ArgumentTypeError(f"variant '{s}' has no label (LABEL:K=V,...)")
    pairs = [env_pair(p) for p in rest.split(",")] if rest else []
    return label, pairs


def thread_list(s):
    try:
        ns = [int(x) for x in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of thread counts")
    if not ns or any(n < 1 or n > 1024 for n in ns):
        raise argparse.ArgumentTypeError(f"thread counts must be 1-1024, got '{s}'")
    return ns


def positive(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a number")
    if v < 1:
        raise argparse.ArgumentTypeError(f"'{s}' is not positive")
    return v


def timed(cmd, env, timeout):
    """(wall s, user+sys CPU s, voluntary context switches) of one run of cmd, its own rusage
    (which covers the children it waited for: the recorded program under whymiss record)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            fail(f"'{' '.join(cmd)}' took longer than {timeout:.0f} s")
        time.sleep(0.002)
    dt = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        fail(f"'{' '.join(cmd)}' failed ({p.returncode}): {err[-1500:]}")
    return dt, ru.ru_utime + ru.ru_stime, ru.ru_nvcsw


def fit(points):
    """Least squares t = a + b*N over [(N, t)]; None with fewer than two distinct N."""
    if len({n for n, _ in points}) < 2:
        return None
    mn = statistics.mean(n for n, _ in points)
    mt = statistics.mean(t for _, t in points)
    b = sum((n - mn) * (t - mt) for n, t in points) / sum((n - mn) ** 2 for n, _ in points)
    return mt - b * mn, b


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--threads", type=thread_list, default=[1, 2, 4, 8], help="default 1,2,4,8")
    ap.add_argument("--reps", type=positive, default=3)
    ap.add_argument("--passes", type=positive, default=200, help="sweeps per thread (default 200)")
    ap.add_argument("--kib", type=positive, default=64, help="array per thread, KiB (default 64)")
    ap.add_argument("--cache", default=GEOMETRY, help=f"geometry for whymiss record (default {GEOMETRY})")
    ap.add_argument("--env", type=env_pair, action="append", default=[],
                    help="K=V for every whymiss run (repeatable)")
    ap.add_argument("--label", default="exact", help="name of the exact runs without --variant")
    ap.add_argument("--variant", type=variant, action="append", default=[],
                    help="LABEL:K=V,K=V... a second set of exact runs with this environment (repeatable)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--cc", default="cc")
    args = ap.parse_args()
    variants = args.variant or [(args.label, [])]
    if len({v[0] for v in variants}) != len(variants):
        fail("two variants have the same label")

    build = os.path.abspath(args.build)
    src = os.path.join(here, "private_threads.c")
    tmp = tempfile.TemporaryDirectory(prefix="whymiss-scaling.")
    snap = tmp.name
    rt = os.path.join(build, "lib", "libwhymiss-rt.so")
    whymiss = os.path.join(snap, "whymiss")
    wrapper = os.path.join(build, "bin", "whymiss-cc")
    for p in (os.path.join(build, "bin", "whymiss"), wrapper, rt):
        if not os.access(p, os.R_OK):
            fail(f"missing {p} (scripts/build.sh, or --build)")
    if shutil.which(args.cc) is None:
        fail(f"no compiler '{args.cc}'")
    # Snapshot whymiss and the runtime: the exact build finds libwhymiss-rt.so through RUNPATH,
    # which LD_LIBRARY_PATH overrides.
    shutil.copy2(os.path.join(build, "bin", "whymiss"), whymiss)
    shutil.copy2(rt, os.path.join(snap, "libwhymiss-rt.so"))
    native = os.path.join(snap, "private_threads")
    exact = os.path.join(snap, "private_threads.exact")
    for cmd in ([args.cc, "-O2", "-pthread", src, "-o", native],
                [wrapper, "-O2", "-pthread", src, "-o", exact]):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, WHYMISS_CC=args.cc))
        if r.returncode != 0:
            fail(f"'{' '.join(cmd)}' failed: {r.stdout[-1500:]}")
    base_env = dict(os.environ)
    base_env["LD_LIBRARY_PATH"] = snap + (":" + base_env["LD_LIBRARY_PATH"]
                                          if base_env.get("LD_LIBRARY_PATH") else "")
    envs = {}
    for label, pairs in variants:
        e = dict(base_env)
        e.update(dict(args.env))
        e.update(dict(pairs))
        envs[label] = e
    prof = os.path.join(snap, "x.data")
    prog_args = [str(args.passes), str(args.kib)]

    try:
        # The commit of the tree the build belongs to (--build may be another worktree's).
        head = subprocess.run(["git", "-C", os.path.dirname(build), "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip() or "?"
    except OSError:
        head = "?"
    rt_time = time.strftime("%Y-%m-%d %H:%M", time.gmtime(os.path.getmtime(rt)))
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}")
    print(f"source: git {head} ({os.path.dirname(build)}); {build}/lib/libwhymiss-rt.so built {rt_time} UTC (copied); "
          f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC")
    print("command: " + " ".join(sys.argv))
    print(f"load average before: {loadavg()}")

    tools = ["native"] + [label for label, _ in variants]
    wall = {(t, n): [] for t in tools for n in args.threads}
    cpu = {(t, n): [] for t in tools for n in args.threads}
    csw = {(t, n): [] for t in tools for n in args.threads}
    counts = {}
    loads = []
    for rep in range(args.reps):
        for n in args.threads:
            argv = [str(n)] + prog_args
            runs = [("native", [native] + argv, base_env)]
            for label, _ in variants:
                runs.append((label, [whymiss, "record", "--mode", "exact", "--cache", args.cache, "-o", prof,
                                     "--", exact] + argv, envs[label]))
            for tool, cmd, env in runs:
                w, c, v = timed(cmd, env, args.timeout)
                wall[tool, n].append(w)
                cpu[tool, n].append(c)
                csw[tool, n].append(v)
                if tool != "native":
                    r = subprocess.run([whymiss, "report", "-i", prof, "--format", "json"], env=base_env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    try:
                        j = json.loads(r.stdout)
                        l1 = j["totals"]["levels"][0]
                        counts[tool, n] = (j["threads"], j["totals"]["accesses"], l1["misses"],
                                           j["totals"]["dropped_accesses"])
                    except (ValueError, KeyError, IndexError):
                        fail(f"whymiss report could not read the profile of {tool} at {n} threads: "
                             f"{r.stderr.strip()[-500:]}")
            loads.append(float(loadavg().split()[0]))
            sys.stderr.write(f"rep {rep + 1}/{args.reps} N={n}: "
                             + ", ".join(f"{t} {wall[t, n][-1]:.2f}s" for t in tools)
                             + f" (load {loads[-1]:.2f})\n")
    print(f"load average after: {loadavg()}; 1-min load after each N: min {min(loads):.2f}, "
          f"max {max(loads):.2f}")
    print(f"{args.reps} interleaved runs per cell; program: private_threads N {args.passes} {args.kib} "
          f"(each thread {args.passes} sweeps of {args.kib} KiB); exact = `whymiss record --mode exact "
          f"--cache {args.cache}`" + (f"; --env {' '.join(k + '=' + v for k, v in args.env)}" if args.env else ""))
    print()

    one = args.threads[0] if 1 not in args.threads else 1
    med = {k: statistics.median(v) for k, v in wall.items()}
    fast = {k: min(v) for k, v in wall.items()}
    for label, pairs in [("native", [])] + variants:
        title = label if label == "native" else (
            f"{label}" + (f" ({', '.join(k + '=' + v for k, v in pairs)})" if pairs else ""))
        print(f"### {title}\n")
        if label == "native":
            print(f"| threads | median s | fastest s | median / N={one} | fastest / N={one} | CPU s (median) |")
            print("|---:|---:|---:|---:|---:|---:|")
            for n in args.threads:
                print(f"| {n} | {med[label, n]:.3f} | {fast[label, n]:.3f} | {med[label, n] / med[label, one]:.2f} | "
                      f"{fast[label, n] / fast[label, one]:.2f} | {statistics.median(cpu[label, n]):.3f} |")
            print()
            continue
        print(f"| threads | median s | fastest s | median / N={one} | fastest / N={one} | exact/native (median) "
              f"| CPU s (median) | voluntary ctx switches (median) | accesses | L1 misses | ns per access (median) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in args.threads:
            th, acc, l1, dropped = counts[label, n]
            print(f"| {n} | {med[label, n]:.2f} | {fast[label, n]:.2f} | {med[label, n] / med[label, one]:.2f} | "
                  f"{fast[label, n] / fast[label, one]:.2f} | {med[label, n] / med['native', n]:.0f}x | "
                  f"{statistics.median(cpu[label, n]):.2f} | {statistics.median(csw[label, n]):.0f} | "
                  f"{acc:,} | {l1:,} | {med[label, n] / acc * 1e9:.0f} |"
                  + (f" ({dropped:,} dropped)" if dropped else ""))
        print()
        for name, sel in (("every N", args.threads), ("N >= 2", [n for n in args.threads if n >= 2])):
            for what, table in (("median", med), ("fastest", fast)):
                f = fit([(n, table[label, n]) for n in sel])
                if f is None:
                    continue
                a, b = f
                acc1 = counts[label, max(sel)][1] / max(sel)
                print(f"- fit of the {what}s over {name}: t(N) = {a:.3f} + {b:.3f} * N s; "
                      f"b per access of one thread {b / acc1 * 1e9:.0f} ns; predicts t(16) = {a + 16 * b:.2f} s")
        print()
    if len(variants) > 1:
        first = variants[0][0]
        print(f"### variants side by side (median s; in brackets: / {first})\n")
        print("| threads | " + " | ".join(label for label, _ in variants) + " |")
        print("|---:|" + "---:|" * len(variants))
        for n in args.threads:
            print(f"| {n} | " + " | ".join(
                f"{med[label, n]:.2f}" + ("" if label == first else f" ({med[label, n] / med[first, n]:.2f})")
                for label, _ in variants) + " |")
        print()
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
