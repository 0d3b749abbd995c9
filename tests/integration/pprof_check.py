#!/usr/bin/env python3
"""pprof_check.py WHYMISS PROGRAM: `whymiss report --format pprof` read by `go tool pprof`.
Records PROGRAM (an exact-mode build) and checks that `go tool pprof -top` on the pprof output
ranks first the function of the JSON report's hottest source line (its innermost frame), with the
same L1 misses, and that the file names the values as counted."""
import json
import os
import re
import sys
import tempfile

from reportlib import record_and_report, run



def main():
    whymiss, prog = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        paths, why = record_and_report(whymiss, prog, tmp, ("json", "pprof"))
        if why:
            print("FAIL:", why)
            return 1
        js, pb = paths["json"], paths["pprof"]
        report = json.load(open(js))
        level1 = report["totals"]["levels"][0]["name"]
        hot = report["source_lines"][0]
        env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"))
        top = run("go", "tool", "pprof", "-top", f"-sample_index={level1}_misses", pb, env=env)
        if top.returncode != 0:
            print("FAIL: go tool pprof exited", top.returncode, top.stderr.strip())
            return 1
        if "values are counted" not in top.stdout:
            print("FAIL: the profile's comments do not say how values were obtained:", top.stdout[:400])
            return 1
        rows = [l.split() for l in top.stdout.splitlines() if re.match(r"^\s*\d+\s+[\d.]+%", l)]
        if not rows:
            print("FAIL: no rows in pprof -top:", top.stdout)
            return 1
        flat, func = int(rows[0][0]), rows[0][5]
        want_func, want = hot["frames"][0]["function"], hot["misses"][level1]
        if func != want_func or flat != want:
            print(f"FAIL: pprof's top is {func} with {flat}, the report's hottest line is in {want_func} "
                  f"with {want} {level1} misses:\n{top.stdout}")
            return 1
    print(f"ok: go tool pprof ranks {func} first with {flat} {level1} misses, as the report does")
    return 0


if __name__ == "__main__":
    sys.exit(main())
