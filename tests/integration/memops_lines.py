#!/usr/bin/env python3
"""Accesses of whymiss-cc's inline memcpy/memset wrappers (gcc_memops.h, marked artificial) are the
caller's: exact mode's source lines never name the header, and the caller's line has them.

  memops_lines.py WHYMISS PROGRAM SOURCE LINE   # PROGRAM: a whymiss-cc build of SOURCE
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    whymiss, program, source, line = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        r = subprocess.run([whymiss, "run", "--mode", "exact", "-o", os.path.join(tmp, "p.data"),
                            "--format", "json", "--output", rep, "--", program],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"FAIL: whymiss exited {r.returncode}: {r.stderr.strip()}")
            return 1
        with open(rep) as f:
            lines = json.load(f)["source_lines"]
    # A row is keyed by its out-of-line function's line; `frames` holds the inline chain (the
    # checksum loop is inlined into main at -O2), innermost first.
    def places(sl):
        return [sl] + list(sl.get("frames") or [])
    header = [sl for sl in lines if any(os.path.basename(f.get("file") or "") == "gcc_memops.h"
                                        for f in places(sl))]
    if header:
        print(f"FAIL: accesses attributed to the wrapper header: {header}")
        return 1
    here = [sl for sl in lines if sl.get("reads", 0) != 0 and any(
        f.get("file") and os.path.exists(f["file"]) and os.path.samefile(f["file"], source)
        and f.get("line") == line for f in places(sl))]
    if not here:
        print(f"FAIL: no accesses on {os.path.basename(source)}:{line}")
        return 1
    print(f"ok: {os.path.basename(source)}:{line} has the wrapper's accesses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
