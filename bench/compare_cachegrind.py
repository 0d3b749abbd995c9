#!/usr/bin/env python3
"""Validate whymiss exact mode against Valgrind's cachegrind: per-source-line L1 data misses.

For each single-threaded workload (and its fixed twin), run

  * whymiss exact mode on the exact build (build/workloads/exact-<cc>/<name>) with a two-level
    hierarchy L1=48K:12:64,L2=32M:16:64 (the last level plays cachegrind's LL), JSON report;
  * cachegrind on the native build (build/workloads/native/wl_<name>, same source, gcc -O2 -g,
    no instrumentation) with --D1=49152,12,64 --LL=33554432,16,64 --I1=32768,8,64,

and compare D1mr+D1mw per (file, line) with whymiss's source_lines[*].misses.L1 on the "hot
lines": lines of the workload's own .c file holding >= 1% of the program's D1 misses in
cachegrind, or >= 1% of whymiss's L1 misses (a line only the whymiss-cc build misses on, such as
a zeroing loop that the native build replaced by calloc, is hot too), and >= 64 misses in either. A hot line passes if it is
within --tolerance (default 5%). Prints one markdown table; exits 1 if any hot line fails, 2 on a
setup error. --readme FILE also writes the tables, with the machine, commit, date and command,
into FILE between the lines "<!-- compare_cachegrind:begin -->" and "<!-- ...:end -->".

  bench/compare_cachegrind.py [--build build] [--cc gcc|clang] [--scale N] [--keep DIR]
                              [--tolerance 0.05] [--readme bench/README.md] [workload ...]

--cc clang compares build/workloads/exact-clang/<name> against a native clang build compiled
here (clang -std=c11 -O2 -g -pthread, the flags CMake uses for the native gcc build) in a
temporary directory.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

DEFAULT_WORKLOADS = ["conflict_app", "conflict_app_fixed", "conflict_alloc", "conflict_alloc_fixed",
                     "capacity", "capacity_fixed", "control", "zero_init"]
WHYMISS_CACHE = "L1=48K:12:64,L2=32M:16:64"
# A line with fewer misses than this in both tools is never hot, however small the program's
# total: the analysis' own floor (analysis::Knobs::min_misses), under which nothing is a finding.
# (The control program has 261 misses in all; 1 % of it is 3 compulsory misses on a stack line.)
MIN_HOT = 64
CG_CACHE = ["--D1=49152,12,64", "--LL=33554432,16,64", "--I1=32768,8,64"]


def parse_cachegrind(path):
    """Returns ({(file, line): {event: count}}, [event names]) from a cachegrind.out file.

    Handles the "events:" header, "fl=" (and "fi="/"fe=" inline-file) and "fn=" lines, name
    compression "fl=(N) name" / "fl=(N)", and count lines "<line> <counts...>" where trailing
    zero counts may be omitted."""
    events = None
    names = {}  # (kind, id) -> name; kind is "fl" or "fn" (fi/fe share the fl table)
    per_line = defaultdict(lambda: defaultdict(int))
    cur_file = None

    def resolve(kind, value):
        value = value.strip()
        close = value.find(")")
        ident = value[1:close] if value.startswith("(") and close > 1 else ""
        if ident.isdigit():  # "(N) name" defines N, "(N)" refers to it; "(below main)" is a name
            rest = value[close + 1:].strip()
            if rest:
                names[(kind, ident)] = rest
                return rest
            return names[(kind, ident)]
        return value

    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line:
                continue
            if line.startswith("events:"):
                events = line.split(":", 1)[1].split()
            elif line.startswith(("fl=", "fi=", "fe=")):
                cur_file = resolve("fl", line[3:])
            elif line.startswith("fn="):
                resolve("fn", line[3:])
            elif line[0].isdigit():
                if events is None:
                    raise ValueError(f"{path}: count line before the events: header")
                parts = line.split()
                lineno = int(parts[0])
                counts = per_line[(cur_file, lineno)]
                for ev, v in zip(events, parts[1:]):
                    counts[ev] += int(v)
            # desc:, cmd:, summary:, totals: and anything else are ignored.
    if events is None:
        raise ValueError(f"{path}: no events: line")
    return per_line, events


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}\n")
        sys.exit(2)
    return r


def build_native_clang(src_dir, name, out_dir):
    base = name[:-len("_fixed")] if name.endswith("_fixed") else name
    out = os.path.join(out_dir, "wl_" + name)
    cmd = ["clang", "-std=c11", "-O2", "-g", "-pthread"]
    if name.endswith("_fixed"):
        cmd.append("-DWHYMISS_FIXED")
    cmd += [os.path.join(src_dir, base + ".c"), "-o", out]
    run(cmd)
    return out


def compare(name, args, src_dir, work):
    base = name[:-len("_fixed")] if name.endswith("_fixed") else name
    src = os.path.realpath(os.path.join(src_dir, base + ".c"))
    exact = os.path.join(args.build, "workloads", "exact-" + args.cc, name)
    if args.cc == "gcc":
        native = os.path.join(args.build, "workloads", "native", "wl_" + name)
    else:
        native = build_native_clang(src_dir, name, work)
    for p in (exact, native):
        if not os.access(p, os.X_OK):
            sys.stderr.write(f"missing executable {p} (cmake --build {args.build})\n")
            sys.exit(2)
    scale = [str(args.scale)]

    cg_out = os.path.join(work, f"cachegrind.out.{args.cc}.{name}")
    run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CG_CACHE,
         f"--cachegrind-out-file={cg_out}", native, *scale])
    cg, events = parse_cachegrind(cg_out)
    for ev in ("D1mr", "D1mw"):
        if ev not in events:
            sys.stderr.write(f"{cg_out}: no {ev} event\n")
            sys.exit(2)
    cg_miss = {k: v["D1mr"] + v["D1mw"] for k, v in cg.items()}
    cg_total = sum(cg_miss.values())

    prof = os.path.join(work, f"whymiss.{args.cc}.{name}.data")
    rep = os.path.join(work, f"whymiss.{args.cc}.{name}.json")
    run([os.path.join(args.build, "bin", "whymiss"), "run", "--mode", "exact", "--cache", WHYMISS_CACHE,
         "-o", prof, "--format", "json", "--output", rep, "--", exact, *scale])
    with open(rep) as f:
        report = json.load(f)
    wm_line = defaultdict(int)
    for sl in report["source_lines"]:
        # cachegrind counts an instruction at its own line, which for inlined code is the inlined
        # function's (the innermost frame); whymiss's source line is the outermost caller's, with
        # the inline chain in "frames", innermost first.
        at = sl["frames"][0] if sl.get("frames") else sl
        if at.get("file") and os.path.realpath(at["file"]) == src:
            wm_line[at["line"]] += sl["misses"].get("L1", 0)
    wm_total = report["totals"]["levels"][0]["misses"]

    rows = []
    own = {line: n for (fl, line), n in cg_miss.items() if fl and os.path.realpath(fl) == src}
    for line in sorted(set(own) | set(wm_line)):
        n, w = own.get(line, 0), wm_line.get(line, 0)
        if max(n, w) >= MIN_HOT and ((cg_total and n >= 0.01 * cg_total) or (wm_total and w >= 0.01 * wm_total)):
            rel = (w - n) / n if n else float("inf")
            rows.append((line, n, w, rel))
    own_cg = sum(n for (fl, _), n in cg_miss.items() if fl and os.path.realpath(fl) == src)
    return {"name": name, "rows": rows, "cg_total": cg_total, "cg_own": own_cg,
            "wm_total": wm_total, "wm_own": sum(wm_line.values())}


def write_readme(path, lines, args, here):
    """Replaces the text between the begin/end markers of `path` with the run's tables, headed by
    the machine (lscpu), the commit, the date and the command."""
    begin, end = "<!-- compare_cachegrind:begin -->", "<!-- compare_cachegrind:end -->"
    with open(path) as f:
        text = f.read()
    if begin not in text or end not in text:
        sys.stderr.write(f"{path}: no {begin} ... {end} section\n")
        sys.exit(2)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = dict(l.split(":", 1) for l in lscpu.splitlines() if ":" in l)
    cpu = " ".join(info.get("Model name", "?").split())
    cpus = info.get("CPU(s)", "?").strip()
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    # Changes to anything but the file being written make the commit not what was measured.
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no", "--",
                            ":/", f":(exclude){os.path.abspath(path)}"],
                           capture_output=True, text=True).stdout.strip()
    vg = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    date = subprocess.run(["date", "-u", "+%Y-%m-%d %H:%M UTC"], capture_output=True, text=True).stdout.strip()
    cmd = " ".join(["bench/compare_cachegrind.py"] + sys.argv[1:])
    head = [f"Machine: {cpu}, {cpus} vCPUs (lscpu); {vg}; git {commit}{' + uncommitted changes' if dirty else ''}; "
            f"{date}.", f"Command: `{cmd}`", ""]
    body = "\n".join(head + lines).rstrip() + "\n"
    pre, rest = text.split(begin, 1)
    post = rest.split(end, 1)[1]
    with open(path, "w") as f:
        f.write(pre + begin + "\n" + body + end + post)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--cc", choices=["gcc", "clang"], default="gcc")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--keep", help="keep cachegrind.out and whymiss files in this directory")
    ap.add_argument("--readme", help="write the results into this file between its markers")
    ap.add_argument("workloads", nargs="*", default=DEFAULT_WORKLOADS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if shutil.which("valgrind") is None:
        sys.stderr.write("valgrind not found\n")
        return 2
    src_dir = os.path.join(here, "..", "tests", "workloads")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = os.path.abspath(args.keep)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="whymiss-cg.")
        work = cleanup.name

    out = []

    def emit(text=""):
        print(text)
        out.append(text)

    emit(f"Per-line L1D misses, whymiss exact ({args.cc}, exact-{args.cc} build, --cache {WHYMISS_CACHE}) "
          f"vs cachegrind ({'native gcc build' if args.cc == 'gcc' else 'native clang build'}, "
          f"{' '.join(CG_CACHE)}), scale {args.scale}; hot = >= 1% of the program's D1 misses in cachegrind or in whymiss, and >= {MIN_HOT} misses; "
          f"tolerance {args.tolerance:.0%}\n")
    emit("| program | line | cachegrind D1 misses | whymiss L1 misses | difference | |")
    emit("|---|---:|---:|---:|---:|---|")
    failed = []
    summaries = []
    for name in args.workloads:
        r = compare(name, args, src_dir, work)
        summaries.append(r)
        if not r["rows"]:
            emit(f"| `{name}` | (no hot line) | | | | |")
        for line, n, w, rel in r["rows"]:
            ok = abs(rel) <= args.tolerance
            if not ok:
                failed.append((name, line))
            diff = f"{rel:+.2%}" if n else "(none natively)"
            emit(f"| `{name}` | {line} | {n:,} | {w:,} | {diff} | {'PASS' if ok else '**FAIL**'} |")
    emit()
    emit("| program | cachegrind D1 misses, whole program | of which in the workload's .c | "
         "whymiss L1 misses, whole program | of which in the workload's .c |")
    emit("|---|---:|---:|---:|---:|")
    for r in summaries:
        emit(f"| `{r['name']}` | {r['cg_total']:,} | {r['cg_own']:,} | {r['wm_total']:,} | {r['wm_own']:,} |")
    emit()
    if failed:
        emit("FAIL: " + ", ".join(f"`{n}`:{l}" for n, l in failed) +
             f" differ by more than {args.tolerance:.0%}")
        rc = 1
    else:
        emit(f"PASS: every hot line within {args.tolerance:.0%}")
        rc = 0
    if args.readme:
        write_readme(args.readme, out, args, here)
    if cleanup:
        cleanup.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
