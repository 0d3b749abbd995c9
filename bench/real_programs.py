#!/usr/bin/env python3
"""Exact mode vs cachegrind on real programs: lz4 (one thread) and zstd -T2 (five threads).

The synthetic workloads in tests/workloads/ are built to miss: conflict_app misses L1 on every
access, the sharing programs take a coherence miss on every other one. This script measures the
same ratio on code nobody wrote for whymiss. Their sources are Debian's: fetched at run time with
`apt-get source` (a private deb-src list, so the machine's apt setup is left alone; needs root),
unpacked into --work, and built twice each: natively (the project's own Makefile and flags) and
with `CC=build/bin/whymiss-cc`. Nothing of them is kept in this repository.

Input: a deterministic 8 MB text (seeded pseudo-random words), written into --work.
Runs, interleaved, --reps times (default 3), wall time, median:
  native:     <native build> ARGS
  exact:      build/bin/whymiss record --mode exact -o TMP -- <wrapper build> ARGS
  cachegrind: valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 --LL=33554432,16,64
                --cachegrind-out-file=/dev/null <native build> ARGS
Prints one markdown table; its thread count is what exact mode's report says. Exit 0 after a complete run, 2 on a setup error.

  bench/real_programs.py [--build build] [--work /tmp/whymiss-real] [--reps 3]
"""
import argparse
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile

from timing import CACHEGRIND, timed

PACKAGES = {"lz4": "lz4", "zstd": "libzstd"}  # program -> Debian source package
DEB_SRC = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def fail(msg):
    sys.stderr.write(f"real_programs: {msg}\n")
    sys.exit(2)


def run(cmd, cwd=None, env=None, log=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{r.stdout}\n")
    if r.returncode != 0:
        fail(f"'{' '.join(cmd)}' failed ({r.returncode}); see {log or 'its output'}:\n{r.stdout[-1500:]}")
    return r.stdout


def orig_tarballs(src):
    """{program: its .orig tarball in src, or None}."""
    def one(pkg):
        tars = [t for t in sorted(glob.glob(os.path.join(src, f"{pkg}_*.orig.tar.*"))) if not t.endswith(".asc")]
        return tars[0] if tars else None
    return {p: one(pkg) for p, pkg in PACKAGES.items()}


def fetch(work, log):
    """Downloads the source packages into work/src (once) and returns {program: orig tarball}."""
    src = os.path.join(work, "src")
    os.makedirs(os.path.join(src, "lists", "partial"), exist_ok=True)
    tars = orig_tarballs(src)
    if all(tars.values()):
        return tars
    if os.geteuid() != 0:
        fail("fetching the Debian sources needs root (apt-get); run as root or put their .orig "
             f"tarballs into {src}")
    with open(os.path.join(src, "deb-src.sources"), "w") as f:
        f.write(DEB_SRC)
    apt = ["apt-get", "-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={src}",
           "-o", f"Dir::State::Lists={os.path.join(src, 'lists')}"]
    run(apt + ["update"], log=log)
    run(apt + ["source", "--download-only", *PACKAGES.values()], cwd=src, log=log)
    tars = orig_tarballs(src)
    for p, tar in tars.items():
        if not tar:
            fail(f"apt-get source {PACKAGES[p]} left no .orig tarball in {src}")
    return tars


def unpack(tar, dest):
    """Unpacks tar into dest (fresh) and returns the one top-level folder it holds."""
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    with tarfile.open(tar) as t:
        t.extractall(dest)
    tops = [d for d in os.listdir(dest) if os.path.isdir(os.path.join(dest, d))]
    if len(tops) != 1:
        fail(f"{tar} does not unpack into one folder")
    return os.path.join(dest, tops[0])


def build(tar, dest, target, cc, log):
    """Builds `target` (a path inside the tree, made by `make -C dirname basename`) with CC=cc."""
    top = unpack(tar, dest)
    env = dict(os.environ)
    if cc:
        env["CC"] = cc
    run(["make", "-j2", "-C", os.path.join(top, os.path.dirname(target)), os.path.basename(target)],
        env=env, log=log)
    exe = os.path.join(top, target)
    if not os.access(exe, os.X_OK):
        fail(f"the build made no {exe}")
    return exe


def corpus(path, size=8_000_000):
    """Deterministic compressible text: seeded words, lines of 8-16 of them."""
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    rng = random.Random(20261125)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
             for _ in range(5000)]
    out, n = [], 0
    while n < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(8, 16))) + "\n"
        out.append(line)
        n += len(line)
    with open(path + ".tmp", "w") as f:
        f.write("".join(out)[:size])
    os.replace(path + ".tmp", path)



def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--work", default="/tmp/whymiss-real")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    build_dir = os.path.abspath(args.build)
    whymiss = os.path.join(build_dir, "bin", "whymiss")
    wrapper = os.path.join(build_dir, "bin", "whymiss-cc")
    for p in (whymiss, wrapper):
        if not os.access(p, os.X_OK):
            fail(f"missing {p} (cmake --build {args.build})")
    for tool in ("valgrind", "make", "cc"):
        if shutil.which(tool) is None:
            fail(f"{tool} not found")
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "build.log")
    open(log, "w").close()
    tars = fetch(work, log)
    sys.stderr.write("building lz4 and zstd, natively and with whymiss-cc (a few minutes)\n")
    exe = {}
    for prog, target in (("lz4", "programs/lz4"), ("zstd", "programs/zstd")):
        exe[prog] = (build(tars[prog], os.path.join(work, prog + "-native"), target, None, log),
                     build(tars[prog], os.path.join(work, prog + "-exact"), target, wrapper, log))
    text = os.path.join(work, "input.txt")
    corpus(text)
    out = os.path.join(work, "out")
    runs = [
        ("lz4 -1", "lz4", ["-f", "-q", "-1", text, out + ".lz4"]),
        ("zstd -3 -T2", "zstd", ["-f", "-q", "-3", "-T2", text, "-o", out + ".zst"]),
    ]
    prof = os.path.join(work, "x.data")
    times = {name: {k: [] for k in ("native", "exact", "cachegrind")} for name, *_ in runs}
    threads = {}
    for rep in range(args.reps):
        for name, prog, argv in runs:
            native, exact = exe[prog]
            times[name]["native"].append(timed([native, *argv]))
            times[name]["exact"].append(timed([whymiss, "record", "--mode", "exact", "-o", prof, "--", exact, *argv]))
            rep_json = subprocess.run([whymiss, "report", "-i", prof, "--format", "json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
            try:
                threads[name] = json.loads(rep_json)["threads"]
            except (ValueError, KeyError):
                fail(f"whymiss report could not read the profile of {name}")
            times[name]["cachegrind"].append(timed(CACHEGRIND + [native, *argv]))
            sys.stderr.write(f"rep {rep + 1}/{args.reps} {name}: "
                             + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times[name].items()) + "\n")
    print(f"sources: {', '.join(os.path.basename(t) for t in tars.values())}; input: 8 MB of text; "
          f"median of {args.reps} interleaved runs, wall time\n")
    print("| program | threads | native s | exact s | cachegrind s | exact/native | exact/cachegrind |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, *_ in runs:
        n, e, c = (statistics.median(times[name][k]) for k in ("native", "exact", "cachegrind"))
        print(f"| `{name}` | {threads[name]} | {n:.3f} | {e:.2f} | {c:.2f} | {e / n:.0f}x | {e / c:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
