#!/usr/bin/env python3
"""check_mutex.py WHYMISS PROGRAM SOURCE: the lines that call pthread_mutex_lock and
pthread_mutex_unlock (marked LOCK and UNLOCK in SOURCE) each show one simulated access per call
(1000) in exact mode's JSON report. Exit 0 when they do, 1 with the reason otherwise."""
import json
import os
import subprocess
import sys
import tempfile


def main():
    whymiss, program, source = sys.argv[1:4]
    marks = {}
    with open(source) as f:
        for n, text in enumerate(f, 1):
            for m in ("/* LOCK */", "/* UNLOCK */"):
                if m in text:
                    marks[m] = n
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        r = subprocess.run([whymiss, "run", "--mode", "exact", "--format", "json", "--output", rep,
                            "--", program], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print("FAIL: whymiss exited", r.returncode, r.stderr.strip())
            return 1
        with open(rep) as f:
            report = json.load(f)
    rows = {row.get("line"): row for row in report.get("source_lines", [])
            if os.path.basename(row.get("file", "")) == os.path.basename(source)}
    for mark, line in marks.items():
        row = rows.get(line)
        if row is None or row.get("writes", 0) != 1000:
            print(f"FAIL: line {line} ({mark}) shows {row and row.get('writes')} writes, "
                  f"expected exactly 1000 simulated lock-word writes; rows: {sorted(rows)}")
            return 1
    print("ok: lock and unlock lines show", [rows[l]["writes"] for l in marks.values()], "writes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
