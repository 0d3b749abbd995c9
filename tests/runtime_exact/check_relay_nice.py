#!/usr/bin/env python3
"""check_relay_nice.py WHYMISS PROGRAM: under `whymiss record --mode exact`, the miss-ratio
worker (named whymiss-mrc) runs at the program's own nice always, and the relay thread (named
whymiss-relay) by default, at +4 with
WHYMISS_RELAY_NICE=4, at 19 at most (19 under `nice -n 5`; 20 counts as 19), and anything but
decimal digits leaves it alone. Exit 0 when all hold, 1 with the reason otherwise."""
import os
import subprocess
import sys
import tempfile


def run(whymiss, program, env_value, outer_nice=0):
    env = dict(os.environ)
    env.pop("WHYMISS_RELAY_NICE", None)
    if env_value is not None:
        env["WHYMISS_RELAY_NICE"] = env_value
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [whymiss, "record", "--mode", "exact", "-o", os.path.join(tmp, "p.prof"), "--",
               program]
        if outer_nice:
            cmd = ["nice", "-n", str(outer_nice)] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {cmd} exited {r.returncode}: {r.stderr.strip()}")
    line = next((l for l in r.stdout.splitlines() if l.startswith("relays ")), None)
    if line is None:
        raise SystemExit(f"FAIL: no 'relays' line in the program's output: {r.stdout!r}")
    f = line.split()
    return int(f[1]), int(f[3]), int(f[5]), int(f[7]), int(f[9])


def main():
    whymiss, program = sys.argv[1:3]
    cases = [(None, 0, 0), ("4", 0, 4), ("19", 5, 19), ("0", 0, 0), ("-3", 0, 0), ("20", 0, 19),
             ("x", 0, 0), (" +4", 0, 0), ("", 0, 0)]
    for value, outer, want_offset in cases:
        relays, relay, main_nice, workers, worker = run(whymiss, program, value, outer)
        want = min(19, main_nice + want_offset)
        if relays != 1 or relay != want or workers != 1 or worker != main_nice:
            print(f"FAIL: WHYMISS_RELAY_NICE={value} under nice {outer}: {relays} relay thread(s) "
                  f"at nice {relay}, {workers} worker(s) at {worker}, main thread at {main_nice}; "
                  f"expected one relay at {want} and one worker at {main_nice}")
            return 1
    print("ok: the relay's nice follows WHYMISS_RELAY_NICE, the worker's stays the program's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
