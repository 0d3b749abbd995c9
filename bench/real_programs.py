#!/usr/bin/env python3
"""Exact mode vs cachegrind on real programs: lz4 -1 (one thread), zstd -3 -T1, zstd -3
--single-thread and zstd -3 -T2.

The synthetic workloads in tests/workloads/ are built to miss: conflict_app misses L1 on every
access, the sharing programs take a coherence miss on every other one. This script measures the
same ratio on code nobody wrote for whymiss. Their sources are Debian's: fetched at run time with
`apt-get source` (a private deb-src list, so the machine's apt setup is left alone; needs root),
unpacked into --work, and built twice each: natively (the project's own Makefile and flags) and
with `CC=build/bin/whymiss-cc`. Nothing of them is kept in this repository. lz4 1.9.4 (Debian 12)
has no -T option: its CLI compresses on one thread, so it runs once, without -T. zstd's -T1 is
one compression worker beside the main thread; --single-thread compresses on the main thread
(zstd's help: "slightly different than -T1"), yet zstd 1.5.4's asynchronous file I/O still
starts threads: exact mode's report counts 4 threads for -T1 and 3 for --single-thread.

Input (--input):
  tar (default): a deterministic tar of /usr/include and /usr/share/doc, written into --work:
    each tree's regular files and symlinks in byte-wise sorted path order, owner and group 0/root,
    mtime 0, permissions as found, GNU format; from each tree the longest such prefix whose
    members fit half of --cap-mb (default 32 MiB, so 16 MiB each; a member's size counts its
    512-byte header and its data padded to 512 bytes). Its contents therefore depend on the
    packages installed: the script prints the file count and the tar's sha256.
  words: the earlier input, 8 MB of seeded pseudo-random words (lines of 8-16 of them).
Runs, interleaved (every tool of every program in rep 1, then rep 2, ...), --reps times
(default 3), wall time (--only TEXT: only the programs whose name contains TEXT, e.g. `--only lz4`
or `--only=-T2`; only theirs are built). Exact mode runs without the caller's WHYMISS_* variables,
so that its figures are the default's:
  native:     <native build> ARGS
  exact:      build/bin/whymiss record --mode exact --cache L1=48K:12:64,L2=32M:16:64 -o TMP
                -- <wrapper build> ARGS
  cachegrind: valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 --LL=33554432,16,64
                --cachegrind-out-file=/dev/null <native build> ARGS
The exact run's two levels are cachegrind's D1 and LL (--cache changes exact mode's; cachegrind's
stay). Prints the machine, the load average before and after, and a markdown table with the
median and fastest run of each tool and exact/cachegrind of both; its thread count is what exact
mode's report says. Exit 0 after a complete run, 2 on a setup error.

--parts adds two exact-mode runs per program and rep, interleaved with the others: without the
miss-ratio curves' tracker (WHYMISS_MRC=0), and without it and the what-if access log
(WHYMISS_MRC=0 WHYMISS_ACCESS_LOG=0), and a second table with each against cachegrind: the
simulation with classification and attribution alone, then with the log, then with the tracker
too (the default); an extra's cost is the difference between neighbouring columns.

  bench/real_programs.py [--build build] [--work /tmp/whymiss-real] [--reps 3] [--input tar|words]
                         [--cap-mb 32] [--cache SPEC] [--only TEXT] [--parts]
"""
import argparse
import glob
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

from timing import CACHEGRIND, cpu_model, loadavg, timed

# Cachegrind's D1 and LL (timing.CACHEGRIND) as exact mode's two levels.
GEOMETRY = "L1=48K:12:64,L2=32M:16:64"
INPUT = object()  # the input file's place in a run's arguments (made once the programs are built)

PACKAGES = {"lz4": "lz4", "zstd": "libzstd"}  # program -> Debian source package
DEB_SRC = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


NAME = "real_programs"  # the prefix of fail()'s message (a script that imports this one sets its own)


def fail(msg):
    sys.stderr.write(f"{NAME}: {msg}\n")
    sys.exit(2)


def run(cmd, cwd=None, env=None, log=None):
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{r.stdout}\n")
    if r.returncode != 0:
        fail(f"'{' '.join(cmd)}' failed ({r.returncode}); see {log or 'its output'}:\n{r.stdout[-1500:]}")
    return r.stdout


def orig_tarballs(src, programs):
    """{program: its .orig tarball in src, or None}, for `programs`."""
    def one(pkg):
        tars = [t for t in sorted(glob.glob(os.path.join(src, f"{pkg}_*.orig.tar.*"))) if not t.endswith(".asc")]
        return tars[0] if tars else None
    return {p: one(PACKAGES[p]) for p in programs}


def fetch(work, log, programs):
    """Downloads the source packages of `programs` into work/src (once) and returns {program: orig
    tarball}."""
    src = os.path.join(work, "src")
    os.makedirs(os.path.join(src, "lists", "partial"), exist_ok=True)
    tars = orig_tarballs(src, programs)
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
    run(apt + ["source", "--download-only", *(PACKAGES[p] for p in programs)], cwd=src, log=log)
    tars = orig_tarballs(src, programs)
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


def program_runs(out):
    """The runs measured: (name, program, arguments), INPUT standing for the input file and `out`
    for the output's path without its extension."""
    # lz4 1.9.4 has no -T: one thread only.
    return [
        ("lz4 -1", "lz4", ["-f", "-q", "-1", INPUT, out + ".lz4"]),
        ("zstd -3 -T1", "zstd", ["-f", "-q", "-3", "-T1", INPUT, "-o", out + ".zst"]),
        # -T1 is one compression worker beside the main thread (4 threads in the report);
        # --single-thread compresses on the main thread (3 threads: the asynchronous I/O ones).
        ("zstd -3 --single-thread", "zstd", ["-f", "-q", "-3", "--single-thread", INPUT, "-o", out + ".zst"]),
        ("zstd -3 -T2", "zstd", ["-f", "-q", "-3", "-T2", INPUT, "-o", out + ".zst"]),
    ]


def fetch_and_build(work, programs, wrapper):
    """Fetches the sources of `programs` (names in PACKAGES) and builds each natively and with
    `wrapper` as CC, under work/; returns ({program: orig tarball}, {program: (native, exact)})."""
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "build.log")
    open(log, "w").close()
    tars = fetch(work, log, programs)
    sys.stderr.write(f"building {' and '.join(programs)}, natively and with whymiss-cc (a few minutes)\n")
    exe = {}
    for prog, target in (("lz4", "programs/lz4"), ("zstd", "programs/zstd")):
        if prog in programs:
            exe[prog] = (build(tars[prog], os.path.join(work, prog + "-native"), target, None, log),
                         build(tars[prog], os.path.join(work, prog + "-exact"), target, wrapper, log))
    return tars, exe


def whymiss_and_tools(build_arg, tools):
    """(absolute build dir, its whymiss, its whymiss-cc) after checking that both and `tools` exist."""
    build_dir = os.path.abspath(build_arg)
    whymiss = os.path.join(build_dir, "bin", "whymiss")
    wrapper = os.path.join(build_dir, "bin", "whymiss-cc")
    for p in (whymiss, wrapper):
        if not os.access(p, os.X_OK):
            fail(f"missing {p} (cmake --build {build_arg})")
    for tool in tools:
        if shutil.which(tool) is None:
            fail(f"{tool} not found")
    return build_dir, whymiss, wrapper


def git_head(build_dir):
    """The short commit of the checkout that holds build_dir, or "?"."""
    try:
        return subprocess.run(["git", "-C", os.path.dirname(build_dir), "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


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



TREES = ("/usr/include", "/usr/share/doc")


def tar_corpus(path, cap):
    """Writes the deterministic tar described in the docstring; returns (files, bytes, sha256).
    Rewritten only when its recorded parameters differ (path + '.id')."""
    ident = f"{TREES} cap={cap} v1"
    if os.path.exists(path) and os.path.exists(path + ".id"):
        with open(path + ".id") as f:
            old = f.read().split("\n")
        if old[0] == ident:
            return int(old[1]), os.path.getsize(path), old[2]

    count = 0
    with tarfile.open(path + ".tmp", "w", format=tarfile.GNU_FORMAT) as t:
        for root in TREES:
            paths = []
            for d, dirs, files in os.walk(root):  # symlinks to folders are in dirs, not followed
                paths += [os.path.join(d, n) for n in files]
                paths += [os.path.join(d, n) for n in dirs if os.path.islink(os.path.join(d, n))]
            paths.sort(key=os.fsencode)
            used = 0
            for p in paths:
                ti = t.gettarinfo(p, arcname=p.lstrip("/"))
                if ti is None or not (ti.isreg() or ti.issym()):
                    continue  # sockets, fifos
                ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, 0, "root", "root"
                # Headers (a long name adds some) plus the data in 512-byte blocks.
                size = len(ti.tobuf(tarfile.GNU_FORMAT, t.encoding, t.errors))
                size += (ti.size + 511) // 512 * 512 if ti.isreg() else 0
                if used + size > (cap - tarfile.RECORDSIZE) // 2:  # room for the end blocks
                    break
                used += size
                count += 1
                if ti.isreg():
                    with open(p, "rb") as f:
                        t.addfile(ti, f)
                else:
                    t.addfile(ti)
    os.replace(path + ".tmp", path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    with open(path + ".id", "w") as f:
        f.write(f"{ident}\n{count}\n{h.hexdigest()}")
    return count, os.path.getsize(path), h.hexdigest()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--work", default="/tmp/whymiss-real")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--input", choices=("tar", "words"), default="tar")
    ap.add_argument("--cap-mb", type=int, default=32, help="size of the tar input, MiB (default 32)")
    ap.add_argument("--cache", default=GEOMETRY, help=f"exact mode's geometry (default {GEOMETRY})")
    ap.add_argument("--only", default="", metavar="TEXT",
                    help="only the programs whose name contains TEXT (e.g. lz4, or --only=-T2)")
    ap.add_argument("--parts", action="store_true",
                    help="also time exact mode without the tracker, and without it and the access log")
    args = ap.parse_args()
    if args.reps < 1 or args.cap_mb < 1:
        fail("--reps and --cap-mb must be positive")
    build_dir, whymiss, wrapper = whymiss_and_tools(args.build, ("valgrind", "make", "cc"))
    work = os.path.abspath(args.work)
    out = os.path.join(work, "out")
    runs = program_runs(out)
    runs = [r for r in runs if args.only in r[0]]
    if not runs:
        fail(f"no program's name contains '{args.only}' (they are: "
             f"{', '.join(name for name, _, _ in program_runs(out))})")
    tars, exe = fetch_and_build(work, sorted({prog for _, prog, _ in runs}), wrapper)
    if args.input == "tar":
        text = os.path.join(work, f"input-{args.cap_mb}m.tar")
        files, size, sha = tar_corpus(text, args.cap_mb << 20)
        what = (f"input: tar of {', '.join(TREES)}, {files} files, {size:,} bytes, sha256 {sha[:16]}...; "
                f"`--input tar --cap-mb {args.cap_mb}`")
    else:
        text = os.path.join(work, "input.txt")
        corpus(text)
        what = "input: 8 MB of seeded random words (`--input words`)"
    runs = [(name, prog, [text if a is INPUT else a for a in argv]) for name, prog, argv in runs]
    prof = os.path.join(work, "x.data")
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
          f"git {git_head(build_dir)} ({os.path.dirname(build_dir)}); {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC")
    print("command: " + " ".join(sys.argv))
    print(f"load average before: {loadavg()}")
    tools = ("native", "exact", "cachegrind")
    # Exact mode's environment: the caller's without its WHYMISS_* knobs (the default's figures).
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("WHYMISS_")}
    # --parts: exact mode with some of its default work switched off (name -> environment).
    parts = {"no tracker": {"WHYMISS_MRC": "0"},
             "no tracker, no log": {"WHYMISS_MRC": "0", "WHYMISS_ACCESS_LOG": "0"}} if args.parts else {}
    times = {name: {k: [] for k in tools + tuple(parts)} for name, *_ in runs}
    threads = {}
    loads = []
    for rep in range(args.reps):
        for name, prog, argv in runs:
            native, exact = exe[prog]
            times[name]["native"].append(timed([native, *argv]))
            times[name]["exact"].append(timed([whymiss, "record", "--mode", "exact", "--cache", args.cache,
                                               "-o", prof, "--", exact, *argv], env=base_env))
            rep_json = subprocess.run([whymiss, "report", "-i", prof, "--format", "json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
            try:
                threads[name] = json.loads(rep_json)["threads"]
            except (ValueError, KeyError):
                fail(f"whymiss report could not read the profile of {name}")
            for part, extra in parts.items():
                times[name][part].append(timed([whymiss, "record", "--mode", "exact", "--cache", args.cache,
                                                "-o", prof, "--", exact, *argv], env={**base_env, **extra}))
            times[name]["cachegrind"].append(timed(CACHEGRIND + [native, *argv]))
            loads.append(float(loadavg().split()[0]))
            sys.stderr.write(f"rep {rep + 1}/{args.reps} {name}: "
                             + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times[name].items())
                             + f" (load {loads[-1]:.2f})\n")
    print(f"load average after: {loadavg()}; 1-min load after each program: min {min(loads):.2f}, "
          f"max {max(loads):.2f}")
    print(f"sources: {', '.join(os.path.basename(t) for t in tars.values())}; {what}; "
          f"{args.reps} interleaved runs, wall time; exact: `--cache {args.cache}`\n")
    print("| program | threads | native s median (fastest) | exact s median (fastest) "
          "| cachegrind s median (fastest) | exact/native median | exact/cachegrind median | fastest/fastest |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, *_ in runs:
        t = times[name]
        n, e, c = (statistics.median(t[k]) for k in tools)
        nf, ef, cf = (min(t[k]) for k in tools)
        print(f"| `{name}` | {threads[name]} | {n:.3f} ({nf:.3f}) | {e:.2f} ({ef:.2f}) | {c:.2f} ({cf:.2f}) | "
              f"{e / n:.0f}x | {e / c:.2f} | {ef / cf:.2f} |")
    if parts:
        names = ("no tracker, no log", "no tracker", "exact")
        print("\nexact mode / cachegrind, medians (fastest / fastest): the simulation with classification "
              "and attribution, + the what-if access log, + the miss-ratio curves' tracker (the default)\n")
        print("| program | " + " | ".join(f"{k} s" for k in names) + " | cachegrind s | "
              + " | ".join(f"{k} / cachegrind" for k in names) + " |")
        print("|---|" + "---:|" * (2 * len(names) + 1))
        for name, *_ in runs:
            t = times[name]
            c, cf = statistics.median(t["cachegrind"]), min(t["cachegrind"])
            cells = [f"{statistics.median(t[k]):.2f}" for k in names] + [f"{c:.2f}"]
            cells += [f"{statistics.median(t[k]) / c:.2f} ({min(t[k]) / cf:.2f})" for k in names]
            print(f"| `{name}` | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
