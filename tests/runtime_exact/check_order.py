#!/usr/bin/env python3
"""check_order.py WHYMISS PROGRAM SOURCE [RUNS] [FIRST]: exact mode simulates a thread's accesses after
the ones they follow in the program (the relay's order between threads, relay.h).

PROGRAM is joined_handover.c built with whymiss-cc: a writer writes LINES heap lines, hands them
over (a join, an atomic release/acquire flag, a mutex and condition variable), and a reader reads
them. Every line is first touched by the writer, so with a shared L3 big enough for all of them
the writer's line (marked WRITE in SOURCE) has exactly LINES L3 misses and the reader's (READ)
none, in every run. A read simulated before the write it follows turns into the line's first
touch: an L3 miss on READ and one fewer on WRITE. The misorder depends on timing (the relay
lagging behind threads that end before it catches up), so each hand-over is run RUNS times
(default 5); before the fix, join and cond were misordered in most runs on a loaded machine.
FIRST (default 0) is passed on: the program first creates and joins that many threads that touch
no memory, so that the writer and reader have thread numbers past parallel mode's 64 cores. With
WHYMISS_STRICT_AFTER in the environment every run must also have moved to strict order (the
report's note), or it would not test the relay's order at all.
Exit 0 when every run holds, 1 with the first deviation otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

LINES = 256
MOVED = "from then on the relay put them in turn"  # the report's note on the move to strict order
# Private L1 and L2 per core, an L3 shared by all and far bigger than LINES lines.
CACHE = "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"


def main():
    whymiss, program, source = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    first = sys.argv[5] if len(sys.argv) > 5 else "0"
    marks = {}
    with open(source) as f:
        for n, text in enumerate(f, 1):
            for m in ("/* WRITE */", "/* READ */"):
                if m in text:
                    marks[m] = n
    if len(marks) != 2:
        print("FAIL: SOURCE lacks the WRITE and READ marks")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        for mode in ("join", "cond", "atomic"):
            for i in range(runs):
                r = subprocess.run([whymiss, "run", "--mode", "exact", "--cache", CACHE,
                                    "--format", "json", "--output", rep, "--", program, mode,
                                    str(LINES), first], capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    print(f"FAIL: {mode} run {i}: whymiss exited {r.returncode}: {r.stderr.strip()}")
                    return 1
                with open(rep) as f:
                    text = f.read()
                report = json.loads(text)
                if os.environ.get("WHYMISS_STRICT_AFTER") and MOVED not in text:
                    print(f"FAIL: {mode} run {i}: no move to strict order (WHYMISS_STRICT_AFTER set)")
                    return 1
                if report["totals"]["dropped_accesses"] != 0:
                    print(f"FAIL: {mode} run {i}: {report['totals']['dropped_accesses']} accesses dropped")
                    return 1
                rows = {row.get("line"): row for row in report.get("source_lines", [])
                        if os.path.basename(row.get("file", "")) == os.path.basename(source)}
                got = {}
                for mark, line in marks.items():
                    row = rows.get(line)
                    got[mark] = row["misses"]["L3"] if row else None
                if got["/* WRITE */"] != LINES or got["/* READ */"] != 0:
                    print(f"FAIL: {mode} run {i}: L3 misses WRITE {got['/* WRITE */']} (expected "
                          f"{LINES}), READ {got['/* READ */']} (expected 0): reads simulated "
                          "before the writes they follow")
                    return 1
    print(f"ok: join, cond and atomic hand-overs, {runs} runs each: WRITE {LINES}, READ 0 L3 misses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
