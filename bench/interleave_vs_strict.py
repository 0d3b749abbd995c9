#!/usr/bin/env python3
"""Parallel mode against strict mode on threaded programs (issue #21: "sharing verdicts unchanged;
coherence miss counts of the contended workloads within 10 % of --interleave strict").

Runs each program under `whymiss run --mode exact --interleave strict` and `--interleave parallel`,
alternating, `--repeats` times, and prints per program: the top finding of each mode (and in how
many runs it was that one), the L1 sharing misses (true + false sharing; medians) and their ratio,
how many parallel runs moved to strict order (docs/parallel-sim.md, "Strict from the first
contention"), and the median wall times; then how many parallel runs, one by one, gave strict's
most common top finding, and where strict itself varied.

Programs: the exact-gcc builds of the three contended workloads (tests/workloads; false sharing
twice, true sharing, at their integration-test scales), the suite's other threaded programs
(their fixed twins, the threaded stress programs, dataviews' handover, latent_fs), and every threaded program of the
differential corpus that is built (tests/corpus: families perthread, shared, control), at its
`exact_scale`, with the manifest's geometry. Nothing runs at once: sharing needs the threads of one
program to overlap. `--busy N` starts N busy loops (processes spinning, no memory) for the whole
measurement, as other work on a shared machine would: both modes then follow threads that run at
once only part of the time, and the verdicts show how each copes. `--scale N` (or A,B,C, one per
workload) changes the three workloads' scales: shorter runs leave less time after the move to
strict order.

  bench/interleave_vs_strict.py [--build build] [--repeats 3] [--only NAME...] [--busy N]
                                [--scale N|A,B,C] [--markdown]
(build the corpus first: tests/corpus/gen.py build/corpus/src --family perthread --family shared
 --family control && tests/corpus/build.py)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SWITCHED = "from then on the relay put them in turn"


def run(whymiss, argv, mode, cache):
    with tempfile.TemporaryDirectory(prefix="whymiss-ivs-") as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [whymiss, "run", "--mode", "exact", "--interleave", mode, "-o",
               os.path.join(tmp, "p.data"), "--format", "json", "--output", out]
        if cache:
            cmd += ["--cache", cache]
        t0 = time.monotonic()
        r = subprocess.run(cmd + ["--"] + argv, capture_output=True, text=True, timeout=900,
                           cwd=tmp)
        wall = time.monotonic() - t0
        if r.returncode != 0 or not os.path.exists(out):
            return {"error": f"exit {r.returncode}: {r.stderr.strip()[:200]}"}
        with open(out) as f:
            rep = json.load(f)
    l1 = rep["totals"]["levels"][0]["misses_by_kind"]
    top = rep["findings"][0] if rep["findings"] else None
    notes = [str(n) for n in rep.get("notes", []) + rep.get("collector_notes", [])]
    return {"top": f"{top['kind']}/{top['origin']}" if top else "none",
            "sharing": l1["true_sharing"]["total"] + l1["false_sharing"]["total"],
            "switched": any(SWITCHED in n for n in notes), "wall": wall}


def programs(build, only, scales=None):
    progs = []
    wl = os.path.join(build, "workloads", "exact-gcc")
    workloads = (("false_sharing_app", 3), ("false_sharing_alloc", 3), ("true_sharing", 10))
    for i, (name, scale) in enumerate(workloads):
        progs.append((name, [os.path.join(wl, name), str(scales[i] if scales else scale)], None))
    # The suite's other threaded programs, at their test lengths: the contended workloads' fixed
    # twins, the threaded stress programs (thread churn past parallel mode's 64 cores included),
    # and the integration tests' own (dataviews' hand-over, the what-if view's latent false
    # sharing). Their verdicts must agree too; their counts are not the target.
    others = [(f"{n}_fixed", [os.path.join(wl, f"{n}_fixed")]) for n, _ in workloads]
    others += [(n, [os.path.join(wl, n)]) for n in ("stress_threads", "stress_many_threads",
                                                      "stress_exit_thread", "stress_fork_thread")]
    others.append(("stress_sigmask", [os.path.join(wl, "stress_sigmask"), "1", "1500"]))
    others = [(n, argv, None) for n, argv in others]
    # (With their tests' geometries: dataviews_check.py's and whatif_check.py's.)
    others.append(("handover", [os.path.join(build, "workloads", "dataviews", "handover")],
                   "L1=32K:8:64,L2=256K:8:64,L3=2M:16:64"))
    others.append(("latent_fs", [os.path.join(build, "workloads", "patterns", "latent_fs")],
                   "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"))
    progs += [p for p in others if os.path.exists(p[1][0])]
    manifest = os.path.join(build, "corpus", "src", "manifest.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            m = json.load(f)
        for p in m["programs"]:
            binary = os.path.join(build, "corpus", "exact", p["name"])
            if p.get("threads", 1) > 1 and os.path.exists(binary):
                progs.append((p["name"], [binary, str(p["exact_scale"])], m["cache_spec"]))
    else:
        sys.stderr.write(f"no corpus at {manifest}: the workloads only\n")
    return [p for p in progs if not only or p[0] in only]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write the raw runs here")
    ap.add_argument("--scale", help="the three workloads' scales: N for all, or A,B,C for "
                    "false_sharing_app, false_sharing_alloc, true_sharing (default 3,3,10: the "
                    "integration tests')")
    ap.add_argument("--busy", type=int, default=0,
                    help="busy loops (processes) running beside the programs (default 0)")
    a = ap.parse_args()
    if a.scale:
        try:
            scales = [int(v) for v in a.scale.split(",")]
        except ValueError:
            scales = []
        if len(scales) == 1:
            scales *= 3
        if len(scales) != 3 or min(scales) < 1:
            ap.error("--scale takes one positive number or three, comma-separated")
        a.scale = scales
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        return measure(a)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def measure(a):
    a.build = os.path.abspath(a.build)
    whymiss = os.path.join(a.build, "bin", "whymiss")
    rows, raw = [], {}
    for name, argv, cache in programs(a.build, a.only, a.scale):
        runs = {"strict": [], "parallel": []}
        for _ in range(a.repeats):
            for mode in ("strict", "parallel"):
                runs[mode].append(run(whymiss, argv, mode, cache))
        raw[name] = runs
        cells = [name]
        for mode in ("strict", "parallel"):
            ok = [r for r in runs[mode] if "error" not in r]
            if not ok:
                cells += [runs[mode][0]["error"], "", ""]
                continue
            tops = [r["top"] for r in ok]
            common = max(set(tops), key=tops.count)
            cells += [f"{common} ({tops.count(common)}/{len(runs[mode])})",
                      statistics.median(r["sharing"] for r in ok),
                      statistics.median(r["wall"] for r in ok)]
        s, p = cells[2], cells[5]
        ratio = (p / s if s else float("nan")) if isinstance(s, (int, float)) and isinstance(p, (int, float)) else float("nan")
        switched = sum(1 for r in runs["parallel"] if r.get("switched"))
        rows.append(cells + [ratio, f"{switched}/{len(runs['parallel'])}"])
        sys.stderr.write(f"{name}: done\n")
    head = ["program", "strict top", "strict sharing", "strict s", "parallel top",
            "parallel sharing", "parallel s", "parallel/strict sharing", "moved to strict"]
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(int(v)) if isinstance(v, (int, float)) else str(v)
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(fmt(v) for v in r) + " |")
    else:
        for r in rows:
            print("  ".join(fmt(v) for v in r))
    agree = sum(1 for r in rows if r[1].split(" ")[0] == r[4].split(" ")[0])
    print(f"\ntop finding the same in {agree} of {len(rows)} programs (most common of "
          f"{a.repeats} runs each)")
    # Run by run: each parallel run against strict's most common verdict for that program.
    runs_ok = runs_all = 0
    for name, runs in raw.items():
        tops = [r["top"] for r in runs["strict"] if "error" not in r]
        if not tops:
            continue
        common = max(set(tops), key=tops.count)
        for r in runs["parallel"]:
            runs_all += 1
            runs_ok += r.get("top") == common
        strict_agree = sum(1 for t in tops if t == common)
        if strict_agree < len(runs["strict"]):
            print(f"{name}: strict itself gave its most common verdict in {strict_agree} of "
                  f"{len(runs['strict'])} runs")
    print(f"parallel runs with strict's most common top finding: {runs_ok} of {runs_all}"
          + (f" ({a.busy} busy loops beside them)" if a.busy else ""))
    if a.json:
        with open(a.json, "x") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
