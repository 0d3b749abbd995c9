#!/usr/bin/env python3
"""check_interleave_locks.py WHYMISS PROGRAM: PROGRAM (relay_nice.c: two threads, prints how many
relay threads it saw) under `whymiss record --mode exact`. With WHYMISS_INTERLEAVE=locks no relay
thread starts, and with parallel (or `--interleave parallel`) one starts idle, for threads to move
to once they contend (docs/parallel-sim.md), which these two never do: either way the report says
the threads were interleaved in host order. Parallel is the default, except with `--cores N`
(threads folded onto cores: strict). With WHYMISS_INTERLEAVE=strict or `--interleave strict` (or
`--cores 2` alone) one relay starts and the report says nothing of the kind. A value it does not know, in the
option or in the environment, is refused with one sentence and exit status 2 before the program
runs. Exit 0 when all hold, 1 with the reason otherwise."""
import os
import subprocess
import sys
import tempfile

NOTE = "interleave in host order"


def run(whymiss, program, value, option=None, cores=None):
    env = dict(os.environ)
    env.pop("WHYMISS_INTERLEAVE", None)
    if value is not None:
        env["WHYMISS_INTERLEAVE"] = value
    extra = ["--interleave", option] if option is not None else []
    extra += ["--cores", cores] if cores is not None else []
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.prof")
        r = subprocess.run([whymiss, "record", "--mode", "exact", *extra, "-o", prof, "--", program],
                           capture_output=True, text=True, env=env, timeout=120)
        if r.returncode != 0:
            return None, r
        line = next((l for l in r.stdout.splitlines() if l.startswith("relays ")), None)
        if line is None:
            raise SystemExit(f"FAIL: no 'relays' line in the program's output: {r.stdout!r}")
        rep = subprocess.run([whymiss, "report", prof], capture_output=True, text=True, timeout=120)
        if rep.returncode != 0:
            raise SystemExit(f"FAIL: report exited {rep.returncode}: {rep.stderr.strip()}")
        return (int(line.split()[1]), NOTE in rep.stdout), r


def main():
    whymiss, program = sys.argv[1:3]
    for value, option, cores, relays_wanted, note_wanted in [
            ("locks", None, None, 0, True), ("parallel", None, None, 1, True),
            (None, "parallel", None, 1, True), (None, None, None, 1, True),
            ("strict", None, None, 1, False), (None, "strict", None, 1, False),
            ("parallel", "strict", None, 1, False), (None, None, "2", 1, False)]:
        what = f"WHYMISS_INTERLEAVE={value}, --interleave {option}, --cores {cores}"
        got, r = run(whymiss, program, value, option, cores)
        if got is None:
            print(f"FAIL: {what}: exited {r.returncode}: {r.stderr.strip()}")
            return 1
        relays, note = got
        if relays != relays_wanted or note != note_wanted:
            print(f"FAIL: {what}: {relays} relay thread(s), host-order note "
                  f"{'present' if note else 'absent'}; expected {relays_wanted} and "
                  f"{'present' if note_wanted else 'absent'}")
            return 1
    for value, option in [("Locks", None), (None, "fast")]:
        got, r = run(whymiss, program, value, option)
        lines = r.stderr.strip().splitlines()
        if got is not None or r.returncode != 2 or len(lines) != 1 or "interleave" not in lines[0].lower():
            print(f"FAIL: WHYMISS_INTERLEAVE={value}, --interleave {option}: exit {r.returncode}, "
                  f"stderr {r.stderr.strip()!r}; expected exit 2 and one sentence naming it")
            return 1
    print("ok: locks without the relay, parallel (the default) with it idle, and the report says so; "
          "strict asked for or --cores: the relay; unknown values refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
