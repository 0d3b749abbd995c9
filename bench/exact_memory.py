#!/usr/bin/env python3
"""Exact mode's peak memory: the largest resident set of `whymiss record` and the program it
runs (wait4's ru_maxrss: the larger of the two, in practice the program with the runtime), for a
program of 1, 8 and 64 threads (bench/exact_memory.c: each thread writes 256 KiB of its own),
next to the same program built natively. A benchmark, not a test.

  bench/exact_memory.py [--build build] [--baseline DIR] [--reps 3] [--threads 1,8,64]
                        [--cache SPEC ...]

Each --cache adds a geometry (default: the detected one, and a 16-core Xeon's 48K/2M/300M
20-way hierarchy, whose 245,760-set LLC is the largest we have met). Runs are interleaved (rep 1
of every row, then rep 2, ...); the table shows the median peak RSS in MiB with the range over
the reps, and the runtime's share: median(exact) - median(native). Prints the machine, the
commit, and one markdown table. With --baseline (another build directory, e.g. of an older
commit) both builds run interleaved in the same run and the table shows before, after and the
ratio of their medians. Exits 2 on a setup error or a failing run.
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

XEON = "L1=48K:12:64,L2=2M:16:64,L3=300M:20:64"


# A child forked from Python starts with Python's resident pages, and ru_maxrss keeps them past
# exec: runs go through this small C program instead, which forks, execs and reports wait4's
# ru_maxrss (KiB) of the child and its waited-for descendants.
PEAK_C = r"""
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char** argv) {
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execv(argv[1], argv + 1);
    _exit(127);
  }
  int st;
  struct rusage ru;
  if (wait4(pid, &st, 0, &ru) != pid) return 3;
  printf("%d %ld\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), ru.ru_maxrss);
  return 0;
}
"""


def peak_rss_mib(peak, argv):
    """Runs argv; returns (exit status, peak RSS in MiB of it and its waited-for descendants)."""
    out = subprocess.run([peak] + argv, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1]) / 1024.0


def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} vCPUs, {platform.release()}"


def commit(root):
    r = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %cd", "--date=short"],
                       capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (" (dirty tree)" if dirty else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--baseline", default=None,
                    help="a second build directory (e.g. of an older commit), measured in the "
                         "same run, interleaved: the table then shows before, after and their ratio")
    ap.add_argument("--baseline-name", default="",
                    help="what the baseline is, for the header (e.g. its commit)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,8,64")
    ap.add_argument("--cache", action="append", default=None)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    builds = [os.path.abspath(a.build)]
    if a.baseline:
        builds.insert(0, os.path.abspath(a.baseline))
    src = os.path.join(root, "bench", "exact_memory.c")
    caches = a.cache or ["", XEON]
    threads = [int(t) for t in a.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        native = os.path.join(tmp, "native")
        peak = os.path.join(tmp, "peak")
        with open(peak + ".c", "w") as f:
            f.write(PEAK_C)
        cmds = [["cc", "-O2", peak + ".c", "-o", peak],
                ["cc", "-O2", "-pthread", src, "-o", native]]
        exact = []  # per build: (whymiss, the program built by its whymiss-cc)
        for b, build in enumerate(builds):
            prog = os.path.join(tmp, f"exact{b}")
            cmds.append([os.path.join(build, "bin", "whymiss-cc"), "-O2", "-pthread", src, "-o", prog])
            exact.append((os.path.join(build, "bin", "whymiss"), prog))
        for cmd in cmds:
            if subprocess.run(cmd).returncode != 0:
                print("cannot build: " + " ".join(cmd), file=sys.stderr)
                return 2
        rows = [(c, n) for c in caches for n in threads]
        got = {(b, c, n): [] for b in range(len(builds)) for c, n in rows}
        nat = {n: [] for n in threads}
        print(f"machine: {machine()}; commit {commit(root)}; {time.strftime('%Y-%m-%d %H:%M')}; "
              f"load {os.getloadavg()[0]:.2f}")
        if a.baseline:
            print(f"baseline: {builds[0]} {a.baseline_name}".rstrip())
        for _ in range(a.reps):
            for n in threads:
                st, rss = peak_rss_mib(peak, [native, str(n)])
                if st != 0:
                    print(f"native {n} threads: exit status {st}", file=sys.stderr)
                    return 2
                nat[n].append(rss)
            for c, n in rows:
                for b, (whymiss, prog) in enumerate(exact):
                    argv = [whymiss, "record", "-o", os.path.join(tmp, "x.data")]
                    if c:
                        argv += ["--cache", c]
                    st, rss = peak_rss_mib(peak, argv + ["--", prog, str(n)])
                    if st != 0:
                        print(f"{whymiss} {c or 'detected'} {n} threads: exit status {st}",
                              file=sys.stderr)
                        return 2
                    got[(b, c, n)].append(rss)
        print(f"\ncommand: BUILD/bin/whymiss record [--cache SPEC] -o x.data -- exact_memory N "
              f"(median of {a.reps}; peak RSS in MiB; range = min-max over the reps)\n")
        med = lambda v: statistics.median(v)
        rng = lambda v: f"{min(v):.0f}-{max(v):.0f}"
        if a.baseline:
            print("| cache | threads | native | before | range | after | range | after/before |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            for c, n in rows:
                b0, b1 = got[(0, c, n)], got[(1, c, n)]
                print(f"| {c or 'detected'} | {n} | {med(nat[n]):.0f} | {med(b0):.0f} | {rng(b0)} "
                      f"| {med(b1):.0f} | {rng(b1)} | {med(b1) / med(b0):.2f} |")
        else:
            print("| cache | threads | native | exact mode | range | runtime's share |")
            print("|---|---:|---:|---:|---:|---:|")
            for c, n in rows:
                v = got[(0, c, n)]
                print(f"| {c or 'detected'} | {n} | {med(nat[n]):.0f} | {med(v):.0f} | {rng(v)} "
                      f"| {med(v) - med(nat[n]):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
