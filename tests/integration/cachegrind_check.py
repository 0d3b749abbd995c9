#!/usr/bin/env python3
"""cachegrind_check.py WHYMISS PROGRAM: `whymiss report --format cachegrind` read by cg_annotate.
Records PROGRAM (an exact-mode build), writes the JSON and the cachegrind report of the same
profile, and checks that cg_annotate (valgrind's) accepts the file and shows the JSON report's
hottest source line with the same L1 miss count, and the same total L1 misses."""
import json
import os
import re
import sys
import tempfile

from reportlib import record_and_report, run



def counts(line):
    """The numbers at the start of a cg_annotate row ('.' = 0), without the (x%) parts."""
    line = re.sub(r"\(\s*[\d.]+%\)", "", line)
    out = []
    for tok in line.split():
        if tok == ".":
            out.append(0)
        elif re.fullmatch(r"[\d,]+", tok):
            out.append(int(tok.replace(",", "")))
        else:
            break
    return out


def main():
    whymiss, prog = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        paths, why = record_and_report(whymiss, prog, tmp, ("json", "cachegrind"))
        if why:
            print("FAIL:", why)
            return 1
        js, cg = paths["json"], paths["cachegrind"]
        report = json.load(open(js))
        hot = report["source_lines"][0]
        level1 = report["totals"]["levels"][0]["name"]
        l1_total = report["totals"]["levels"][0]["misses"]
        ann = run("cg_annotate", "--auto=yes", cg)
        if ann.returncode != 0:
            print("FAIL: cg_annotate exited", ann.returncode, ann.stderr.strip())
            return 1
        text = ann.stdout
        events = re.search(r"^Events shown:\s+(.*)$", text, re.M).group(1).split()
        col = events.index(level1 + "m")
        totals = [counts(l) for l in text.splitlines() if l.rstrip().endswith("PROGRAM TOTALS")]
        if not totals or totals[0][col] != l1_total:
            print(f"FAIL: cg_annotate's total {level1}m {totals[:1]} != the report's {l1_total}")
            return 1
        src = open(hot["file"]).read().splitlines()[hot["line"] - 1].strip()
        rows = [counts(l) for l in text.splitlines() if src and l.rstrip().endswith(src)]
        want = hot["misses"][level1]
        if not any(len(c) > col and c[col] == want for c in rows):
            print(f"FAIL: cg_annotate does not show line {hot['line']} ({src!r}) with {want} {level1} misses: {rows}")
            return 1
    print(f"ok: cg_annotate shows the hot line {hot['line']} with {want} {level1} misses, total {l1_total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
