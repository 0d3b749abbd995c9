#!/usr/bin/env python3
"""diff_check.py WHYMISS PROGRAM FIXED KIND: `whymiss diff` on a workload and its fixed twin.
The KIND finding of the original is "fixed" going to the twin and "new" coming back; the level
L1 misses and the hottest source line fall; bad input is one sentence and exit 2."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_schema  # noqa: E402


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600)


def main():
    whymiss, prog, fixed, kind = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a.data"), os.path.join(tmp, "b.data")
        for path, p in ((a, prog), (b, fixed)):
            r = run(whymiss, "record", "-o", path, "--", p)
            if r.returncode != 0:
                print("FAIL: record", p, r.stderr.strip())
                return 1
        fwd = run(whymiss, "diff", a, b, "--format", "json")
        back = run(whymiss, "diff", b, a, "--format", "json")
        if fwd.returncode or back.returncode:
            print("FAIL: diff exited", fwd.returncode, back.returncode, fwd.stderr, back.stderr)
            return 1
        f, g = json.loads(fwd.stdout), json.loads(back.stdout)
        errors = report_schema.validate(f, "diff") + report_schema.validate(g, "diff")
        if errors:
            print("FAIL: the diff does not follow docs/report.schema.json:", errors[:5])
            return 1
        fk = [x for x in f["findings"] if x["kind"] == kind]
        gk = [x for x in g["findings"] if x["kind"] == kind]
        if not fk or any(x["verdict"] != "fixed" for x in fk):
            print("FAIL: original -> fixed: the", kind, "finding is not 'fixed':", f["findings"])
            return 1
        if not gk or any(x["verdict"] != "new" for x in gk):
            print("FAIL: fixed -> original: the", kind, "finding is not 'new':", g["findings"])
            return 1
        l1 = f["levels"][0]
        if not l1["misses_after"] < l1["misses_before"]:
            print("FAIL: L1 misses did not fall:", l1)
            return 1
        top = f["source_lines"][0]
        if not top["l1_misses_after"] < top["l1_misses_before"] or ":" not in top["name"]:
            print("FAIL: the most changed source line did not fall or has no file:line:", top)
            return 1
        text = run(whymiss, "diff", a, b)
        if text.returncode or not text.stdout.startswith(f"whymiss diff: {a} -> {b}") or "fixed" not in text.stdout:
            print("FAIL: text diff:", text.returncode, text.stdout[:300])
            return 1
        for bad in ([a], [a, b, a], [a, os.path.join(tmp, "missing.data")], [a, b, "--format", "xml"]):
            r = run(whymiss, "diff", *bad)
            if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1:
                print("FAIL: diff", bad, "exited", r.returncode, "with", r.stderr)
                return 1
    print("ok: diff calls the", kind, "finding fixed, and new the other way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
