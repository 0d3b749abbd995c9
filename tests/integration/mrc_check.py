#!/usr/bin/env python3
"""mrc_check.py WHYMISS PROGRAM SIZE...: exact mode's miss-ratio curve against a direct simulation.
Records PROGRAM once with the default cache and reads the JSON report's "mrc" (fully-associative
LRU, from reuse distances); then, for each SIZE, records it with a single fully-associative L1 of
that size and compares that run's L1 miss ratio with the curve's point. The curve is exact mode's
default (every line followed, "counted", whatever the footprint up to 16 Mi lines): the two must
agree to 0.001."""
import json
import os
import sys
import tempfile

from reportlib import run


def miss_ratio_run(whymiss, prog, tmp, cache):
    prof, rep = os.path.join(tmp, "fa.data"), os.path.join(tmp, "fa.json")
    for f in (prof, rep):
        if os.path.exists(f):
            os.unlink(f)
    r = run(whymiss, "record", "-o", prof, "--cache", cache, "--", prog)
    if r.returncode != 0:
        return None, "record --cache " + cache + ": " + r.stderr.strip()
    r = run(whymiss, "report", "-i", prof, "--format", "json", "--output", rep)
    if r.returncode != 0:
        return None, "report: " + r.stderr.strip()
    lv = json.load(open(rep))["totals"]["levels"][0]
    return lv["misses"] / lv["accesses"], None


def main():
    whymiss, prog, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
    with tempfile.TemporaryDirectory() as tmp:
        prof, rep = os.path.join(tmp, "p.data"), os.path.join(tmp, "r.json")
        env = {k: v for k, v in os.environ.items() if k != "WHYMISS_MRC"}
        r = run(whymiss, "run", "-o", prof, "--format", "json", "--output", rep, "--", prog, env=env)
        if r.returncode != 0:
            print("FAIL: run:", r.stderr.strip())
            return 1
        mrc = json.load(open(rep)).get("mrc")
        if not mrc or mrc.get("how") != "counted":
            print("FAIL: no counted mrc in the report:", mrc and mrc.get("how"))
            return 1
        points = {p["size"]: p["miss_ratio"] for p in mrc["points"]}
        for size in sizes:
            if size not in points:
                print("FAIL: the curve has no point at", size, sorted(points))
                return 1
            direct, why = miss_ratio_run(whymiss, prog, tmp, f"L1={size}:{size // mrc['line']}:{mrc['line']}")
            if why:
                print("FAIL:", why)
                return 1
            if abs(direct - points[size]) > 0.001:
                print(f"FAIL: at {size} bytes the curve says {points[size]:.5f}, a fully-associative "
                      f"L1 of that size missed {direct:.5f}")
                return 1
            print(f"  {size:>8} bytes: curve {points[size]:.5f}, direct {direct:.5f}")
    print("ok: the miss-ratio curve matches direct fully-associative simulation at", len(sizes), "sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
