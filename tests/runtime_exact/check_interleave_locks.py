#!/usr/bin/env python3
"""check_interleave_locks.py WHYMISS PROGRAM: PROGRAM (relay_nice.c: two threads, prints how many
relay threads it saw) under `whymiss record --mode exact`. With WHYMISS_INTERLEAVE=locks (or
parallel) no relay
thread starts and the report says the threads were interleaved in host order; without it, or
with another value, one relay starts and the report says nothing of the kind. Exit 0 when all
hold, 1 with the reason otherwise."""
import os
import subprocess
import sys
import tempfile

NOTE = "interleave in host order"


def run(whymiss, program, value):
    env = dict(os.environ)
    env.pop("WHYMISS_INTERLEAVE", None)
    if value is not None:
        env["WHYMISS_INTERLEAVE"] = value
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.prof")
        r = subprocess.run([whymiss, "record", "--mode", "exact", "-o", prof, "--", program],
                           capture_output=True, text=True, env=env, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"FAIL: WHYMISS_INTERLEAVE={value}: exited {r.returncode}: {r.stderr.strip()}")
        line = next((l for l in r.stdout.splitlines() if l.startswith("relays ")), None)
        if line is None:
            raise SystemExit(f"FAIL: no 'relays' line in the program's output: {r.stdout!r}")
        rep = subprocess.run([whymiss, "report", prof], capture_output=True, text=True, timeout=120)
        if rep.returncode != 0:
            raise SystemExit(f"FAIL: report exited {rep.returncode}: {rep.stderr.strip()}")
        return int(line.split()[1]), NOTE in rep.stdout


def main():
    whymiss, program = sys.argv[1:3]
    for value, relays_wanted, note_wanted in [("locks", 0, True), ("parallel", 0, True),
                                              (None, 1, False),
                                              ("strict", 1, False), ("Locks", 1, False)]:
        relays, note = run(whymiss, program, value)
        if relays != relays_wanted or note != note_wanted:
            print(f"FAIL: WHYMISS_INTERLEAVE={value}: {relays} relay thread(s), host-order note "
                  f"{'present' if note else 'absent'}; expected {relays_wanted} and "
                  f"{'present' if note_wanted else 'absent'}")
            return 1
    print("ok: WHYMISS_INTERLEAVE=locks and parallel run without the relay and the report says so")
    return 0


if __name__ == "__main__":
    sys.exit(main())
