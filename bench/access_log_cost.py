#!/usr/bin/env python3
"""access_log_cost.py WHYMISS PROGRAM... [--reps N]: what exact mode's access log costs.

For each program: `whymiss record` with the log (default 2^22 entries) and with
WHYMISS_ACCESS_LOG=0, interleaved, N times; medians of wall time and of peak RSS (the recorded
program's, from wait4), the profile's size, and the time of `whymiss report --format json` on
each profile (the replays run there)."""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def timed(args, env):
    t0 = time.monotonic()
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{args} failed: {p.returncode}")
    return time.monotonic() - t0, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("whymiss")
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cache", default="L1=48K:12:64,L2=1M:16:64,L3=32M:16:64")
    a = ap.parse_args()
    print("| program | record: log on / off | peak RSS: on / off | profile: on / off | report: on / off | log kept / accesses |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for prog in a.programs:
            res = {"on": [], "off": []}
            for _ in range(a.reps):
                for mode in ("on", "off"):
                    env = dict(os.environ)
                    if mode == "off":
                        env["WHYMISS_ACCESS_LOG"] = "0"
                    prof = os.path.join(tmp, mode + ".data")
                    t, rss = timed([a.whymiss, "record", "-o", prof, "--cache", a.cache, "--", prog], env)
                    r, _ = timed([a.whymiss, "report", "-i", prof, "--format", "json", "--output",
                                  os.path.join(tmp, mode + ".json")], env)
                    res[mode].append((t, rss, os.path.getsize(prof), r))
            med = {m: [statistics.median(x[i] for x in res[m]) for i in range(4)] for m in res}
            out = subprocess.run([a.whymiss, "report", "-i", os.path.join(tmp, "on.data"), "--format", "json"],
                                 capture_output=True, text=True).stdout
            import json
            d = json.loads(out)
            kept = "?"
            print(f"| {os.path.basename(prog)} | {med['on'][0]:.2f} s / {med['off'][0]:.2f} s = "
                  f"{med['on'][0] / med['off'][0]:.2f} | {med['on'][1]:.0f} / {med['off'][1]:.0f} MiB | "
                  f"{med['on'][2] / 2**20:.1f} / {med['off'][2] / 2**20:.1f} MiB | "
                  f"{med['on'][3]:.2f} s / {med['off'][3]:.2f} s | {d['totals']['accesses']:,} accesses |")


if __name__ == "__main__":
    main()
