#!/usr/bin/env python3
"""Exact mode's instructions per counted access on real programs, counted by callgrind.

bench/real_programs.py times exact mode against cachegrind in seconds; on our VMs those seconds
move with the load and the host (cachegrind's own time varied by up to 40 % between runs, and
exact mode without its tracker and access log took 2.1x cachegrind's time on lz4 on a Zen 5 host
with a 48 KiB L1D, 3.0x on a Zen 4 one with 32 KiB). Instructions do not: callgrind counts the same total for the same binary, input and
environment whatever else the machine does. This script prints them per access exact mode
counted, split into the runtime's parts, so that a change to the per-access work can be judged
by one run on any machine. (Instructions are not time: a host cache miss costs many.)

Programs (--only TEXT as in real_programs.py): lz4 -1, zstd -3 --single-thread (default), and on
request zstd -3 -T1 and -T2. Valgrind runs one thread at a time, so a threaded program's counts
include its waits for other threads (spins before yielding): single-threaded figures are the
repeatable ones. Sources, builds and the input's kind are real_programs.py's (its functions are
used): a deterministic tar of /usr/include and /usr/share/doc, here --cap-mb 8 by default (under
callgrind exact mode runs ~40x slower than alone). Runs, per program:
  native: valgrind --tool=callgrind <native build> ARGS
  exact:  valgrind --tool=callgrind --trace-children=yes  build/bin/whymiss record --mode exact
            --cache L1=48K:12:64,L2=32M:16:64 -o TMP -- <whymiss-cc build> ARGS
          (the program's process only; without the caller's WHYMISS_* variables), and with
          --parts also with WHYMISS_MRC=0 WHYMISS_ACCESS_LOG=0 (no tracker, no access log).
The instructions of the program's process are split by where they ran (callgrind's counts of each
function's own instructions, inlined code in the function it was inlined into), per counted access:
  simulator              libwhymiss-rt.so's whymiss::sim (the levels, their shadows and first-touch
                         sets, coherence)
  tracker                its whymiss::rt::reuse (the miss-ratio curves: the events the program's
                         threads append, and applying them, on the tracker's thread or theirs)
  runtime, other         the rest of libwhymiss-rt.so (the __tsan_* entries, the hit path,
                         per-instruction counts, a miss's attribution, the access log, the hooks)
  program and libraries  everything else
Exit 0 after a complete run, 2 when the setup or a run fails (one line says which).

  bench/exact_instructions.py [--build build] [--work /tmp/whymiss-real] [--cap-mb 8]
                              [--only TEXT] [--parts]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import real_programs as rp
from timing import cpu_model

# Each function's own instructions (callgrind's exclusive counts: they add up to the process's
# total, unlike inclusive ones, which callgrind_annotate got wrong for on_access in one of two
# identical runs) go to a group by the object that holds the function and its namespace (a
# template's demangled name may start with its return type); inlined code counts in the function
# it was inlined into.
RUNTIME_OBJECT = "libwhymiss-rt.so"
GROUPS = [  # (name, pattern on the function) for the runtime's functions; the last takes the rest
    ("simulator", r"(^|\s)whymiss::sim::"),
    ("tracker", r"(^|\s)whymiss::rt::reuse::"),
    ("runtime, other", r""),
]
OUTSIDE = "program and libraries"
COLUMNS = [name for name, _ in GROUPS] + [OUTSIDE]


rp.NAME = "exact_instructions"
fail = rp.fail


def callgrind(cmd, outdir, env):
    """Runs cmd under callgrind (children traced), one output file per process in outdir."""
    vg = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--dump-instr=no",
          f"--callgrind-out-file={os.path.join(outdir, 'cg.%p')}"]
    r = subprocess.run(vg + cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail(f"'{' '.join(cmd)}' under callgrind failed ({r.returncode}):\n{r.stderr[-1500:]}")


def process_file(outdir, exe):
    """The callgrind file of the process that ran `exe`."""
    for path in sorted(glob.glob(os.path.join(outdir, "cg.*"))):
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("cmd:"):
                    if line.split()[1:2] == [exe]:
                        return path
                    break
    fail(f"no callgrind output names {exe} as its command (in {outdir})")


def totals(path):
    """(total Ir, {function: its own Ir}, {function: its object's path}) of one callgrind file."""
    r = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", "--show=Ir",
                        "--show-percs=yes", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail(f"callgrind_annotate {path} failed:\n{r.stderr[-800:]}")
    total, funcs, objs = None, {}, {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([ \d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        what = m.group(2).strip()
        if what.startswith("PROGRAM TOTALS"):
            total = ir
            continue
        # "file:function [clone ...] [object]" (or "???:function"): the function is after the
        # file's colon; only a function's first entry names its object.
        if ":" not in what or what.startswith("=>"):
            continue
        obj = re.search(r"\s\[(/[^\]]*)\]$", what)
        # (Without the object and a "[clone ...]": not every file's entry names the clone.)
        fn = re.sub(r"(\s+\[[^\]]*\])+$", "", what).split(":", 1)[1]
        if obj:
            objs[fn] = obj.group(1)
        # (A function whose inlined code comes from several files is listed once per file.)
        funcs[fn] = funcs.get(fn, 0) + ir
    if total is None:
        fail(f"callgrind_annotate printed no total for {path}")
    return total, funcs, objs


def group_sums(funcs, objs):
    out = {name: 0 for name in COLUMNS}
    for fn, ir in funcs.items():
        if os.path.basename(objs.get(fn, "")) == RUNTIME_OBJECT:
            out[next(name for name, p in GROUPS if re.search(p, fn))] += ir
        else:
            out[OUTSIDE] += ir
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--work", default="/tmp/whymiss-real")
    ap.add_argument("--cap-mb", type=int, default=8, help="size of the tar input (MiB)")
    ap.add_argument("--only", default=None, metavar="TEXT",
                    help="only the programs whose name contains TEXT (default: lz4 -1 and "
                         "zstd -3 --single-thread; e.g. --only zstd for all three zstd runs)")
    ap.add_argument("--parts", action="store_true",
                    help="also count exact mode without the tracker and the access log")
    args = ap.parse_args()
    if args.cap_mb < 1:
        fail("--cap-mb must be positive")
    build_dir, whymiss, wrapper = rp.whymiss_and_tools(
        args.build, ("valgrind", "callgrind_annotate", "make", "cc"))
    work = os.path.abspath(args.work)
    out = os.path.join(work, "out")
    runs = [r for r in rp.program_runs(out)
            if (args.only in r[0] if args.only is not None else "-T" not in r[0])]
    if not runs:
        fail(f"no program's name contains '{args.only}' (they are: "
             f"{', '.join(name for name, _, _ in rp.program_runs(out))})")
    _, exe = rp.fetch_and_build(work, sorted({prog for _, prog, _ in runs}), wrapper)
    text = os.path.join(work, f"input-{args.cap_mb}m.tar")
    files, size, sha = rp.tar_corpus(text, args.cap_mb << 20)
    runs = [(name, prog, [text if a is rp.INPUT else a for a in argv]) for name, prog, argv in runs]
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs; git {rp.git_head(build_dir)}; "
          f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC")
    print("command: " + " ".join(sys.argv))
    print(f"input: tar of {', '.join(rp.TREES)}, {files} files, {size:,} bytes, sha256 {sha[:16]}...; "
          f"exact: `--cache {rp.GEOMETRY}`; instructions counted by callgrind (valgrind's), "
          "per access exact mode counted\n")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("WHYMISS_")}
    configs = [("default", {})]
    if args.parts:
        configs.append(("no tracker, no log", {"WHYMISS_MRC": "0", "WHYMISS_ACCESS_LOG": "0"}))
    rows = []
    for name, prog, argv in runs:
        native, exact = exe[prog]
        with tempfile.TemporaryDirectory(prefix="whymiss-cg-") as d:
            callgrind([native, *argv], d, base_env)
            native_ir, _, _ = totals(process_file(d, native))
        for cname, extra in configs:
            with tempfile.TemporaryDirectory(prefix="whymiss-cg-") as d:
                prof = os.path.join(d, "x.data")
                callgrind([whymiss, "record", "--mode", "exact", "--cache", rp.GEOMETRY, "-o", prof, "--",
                           exact, *argv], d, {**base_env, **extra})
                ir, funcs, objs = totals(process_file(d, exact))
                rep = subprocess.run([whymiss, "report", "-i", prof, "--format", "json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    accesses = json.loads(rep.stdout)["totals"]["accesses"]
                except (ValueError, KeyError):
                    fail(f"whymiss report could not read the profile of {name} (exit {rep.returncode}): "
                         f"{rep.stderr.strip()[-500:]}")
            if accesses <= 0:
                fail(f"exact mode counted no accesses in {name}")
            rows.append((name, cname, native_ir, ir, accesses, group_sums(funcs, objs)))
            sys.stderr.write(f"{name} ({cname}): {ir / accesses:.0f} instructions per access\n")
    print("| program | exact mode | counted accesses | native instr. | exact instr. | exact/native "
          "| per access: all | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(COLUMNS))
    for name, cname, nir, ir, acc, parts in rows:
        print(f"| `{name}` | {cname} | {acc:,} | {nir / 1e6:,.0f} M | {ir / 1e6:,.0f} M | {ir / nir:.0f}x | "
              f"{ir / acc:.0f} | " + " | ".join(f"{parts[n] / acc:.0f}" for n in COLUMNS) + " |")


if __name__ == "__main__":
    main()
