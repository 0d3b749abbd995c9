#!/usr/bin/env python3
"""dataviews_check.py WHYMISS HANDOVER PHASES: the `flow` and `working-set` views on programs
whose answers are known by construction (tests/integration/dataviews/*.c), recorded in exact mode
with an explicit geometry (L1 32K / L2 256K / L3 2M, 64-byte lines).

handover: 64 one-line messages allocated by T0, each written by T1, then read by T2. The flow of
their allocation site must be exactly alloc T0 -> write T1 and write T1 -> read T2, 64 handovers
each, each handover with the one L1 miss that made it (the first touch of the line by that
thread), and the path alloc T0 -> write T1 -> read T2, and nothing else.

phases: a 16 KiB buffer, then a 1 MiB array swept twice. The array's lines resident in L3 rise
from sample to sample (never fall: it fits) to all of its 16,384 lines at the end; at L1 and L2 it
fills at most the level (512 and 4,096 lines) and at least 90% of it at its peak; the buffer keeps
its 256 lines in L3 at every sample (nothing evicts them there)."""
import json
import os
import sys
import tempfile

from reportlib import run

CACHE = "L1=32K:8:64,L2=256K:8:64,L3=2M:16:64"


def view(whymiss, prog, tmp, name, env=None):
    prof = os.path.join(tmp, os.path.basename(prog) + ".data")
    r = run(whymiss, "record", "-o", prof, "--cache", CACHE, "--", prog, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: record {prog}: {r.stderr.strip()}")
    r = run(whymiss, "report", "-i", prof, "--view", name, "--format", "json")
    if r.returncode != 0:
        raise SystemExit(f"FAIL: report --view {name}: {r.stderr.strip()}")
    t = run(whymiss, "report", "-i", prof, "--view", name)
    if t.returncode != 0:
        raise SystemExit(f"FAIL: report --view {name} (text): {t.stderr.strip()}")
    return json.loads(r.stdout), t.stdout


def site_group(doc, source):
    for g in doc["groups"]:
        s = g.get("alloc_site")
        if s and os.path.basename(s["file"]) == source:
            return g
    return None


def check_flow(whymiss, prog, tmp):
    fails = []
    doc, text = view(whymiss, prog, tmp, "flow")
    if not doc["available"] or doc["obtained"] != "counted":
        return [f"flow unavailable or not counted: {doc}"]
    g = site_group(doc, "handover.c")
    if g is None:
        return ["flow: no group allocated in handover.c: " + json.dumps(doc["groups"])[:400]]
    # The consumer starts after the producer was joined, so the relay simulates all of its reads
    # after all of the producer's writes (also when it catches up only while stopping): a read
    # simulated between them would show as an extra handover each way (read T2 -> write T1 when
    # the next write takes the line back, and one more write T1 -> read T2).
    steps = {(s["from_kind"], s["from"], s["to_kind"], s["to"]): (s["handovers"], s["charged"]) for s in g["steps"]}
    want = {("alloc", 0, "write", 1): (64, 64), ("write", 1, "read", 2): (64, 64)}
    if steps != want:
        fails.append(f"flow steps {steps}, expected {want}")
    path = [(e["kind"], e["thread"]) for e in g["path"]]
    if path != [("alloc", 0), ("write", 1), ("read", 2)]:
        fails.append(f"flow path {path}")
    if "alloc T0 -> write T1 -> read T2" not in text:
        fails.append("the text view does not show the path:\n" + text)
    print(f"  flow: {steps}; path {path}")
    # Turned off: the view says so in one sentence.
    off, _ = view(whymiss, prog, tmp, "flow", env=dict(os.environ, WHYMISS_FLOW="0"))
    if off["available"] or "WHYMISS_FLOW=0" not in off.get("unavailable", ""):
        fails.append(f"WHYMISS_FLOW=0: {off}")
    return fails


def check_working_set(whymiss, prog, tmp):
    fails = []
    doc, text = view(whymiss, prog, tmp, "working-set")
    if not doc["available"]:
        return [f"working-set unavailable: {doc}"]
    cap = [lv["capacity_lines"] for lv in doc["levels"]]
    if cap != [512, 4096, 32768]:
        fails.append(f"capacities {cap}")
    # One group per type: the 1 MiB array of struct row, the 16 KiB buffer of struct scratch.
    groups = {g["type"]: g for g in doc["groups"] if g["heap"]}
    big, small = groups.get("struct row"), groups.get("struct scratch")
    if big is None or small is None:
        return fails + [f"working-set: no groups of struct row and struct scratch: {sorted(map(str, groups))}"]
    if os.path.basename((big["alloc_site"] or {}).get("file", "")) != "phases.c":
        fails.append(f"struct row's allocation site {big['alloc_site']}")
    l3 = [s[2] for s in big["lines"]]
    n = len(l3)
    if n < 3:
        fails.append(f"only {n} samples")
    if any(b < a for a, b in zip(l3, l3[1:])):
        fails.append(f"the array's L3 lines fell: {l3}")
    if l3[-1] != 16384 or l3[0] >= l3[-1]:
        fails.append(f"the array's L3 lines do not rise to 16384: {l3}")
    for lvl, c in ((0, 512), (1, 4096)):
        peak = max(s[lvl] for s in big["lines"])
        if peak > c or peak < 0.9 * c:
            fails.append(f"the array's peak at level {lvl} is {peak}, capacity {c}")
    if any(s[2] != 256 for s in small["lines"]):
        fails.append(f"the buffer's L3 lines {[s[2] for s in small['lines']]}, expected 256 throughout")
    print(f"  working-set: {n} samples; array L3 {l3[0]} .. {l3[-1]}, peaks {big['peak']}; "
          f"buffer peaks {small['peak']}")
    off, _ = view(whymiss, prog, tmp, "working-set", env=dict(os.environ, WHYMISS_WORKING_SET="0"))
    if off["available"] or "WHYMISS_WORKING_SET=0" not in off.get("unavailable", ""):
        fails.append(f"WHYMISS_WORKING_SET=0: {off}")
    return fails


def main():
    whymiss, handover, phases = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        fails = check_flow(whymiss, handover, tmp) + check_working_set(whymiss, phases, tmp)
    if fails:
        print("FAIL:\n  " + "\n  ".join(fails))
        return 1
    print("ok: flow and working-set views give the known answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
