#!/usr/bin/env python3
"""check_interleave_switch.py WHYMISS PROGRAM [--args] [ARG...]: PROGRAM is a contended workload (threads
writing one line in a loop). Under `--interleave parallel` its threads first simulate their own
accesses in host order; their sharing misses ask for strict order, and from then on the relay puts
them in turn, access by access, as `--interleave strict` does (docs/parallel-sim.md, "Strict from
the first contention"). Asserts, against a strict run of the same program:
- the parallel run's report says it moved to strict order, and that no thread stayed behind in
  parallel (the note's "found no relay lane");
- every access is counted once: none dropped, the same total as strict's;
- the top finding (kind, origin) is the same.
The sharing counts themselves are printed, not asserted: both runs follow how the host ran the
threads, and on a loaded machine both move a lot (false_sharing_alloc under two busy loops on two
vCPUs: strict 0.44-1.91 M, parallel 0.35-1.80 M in three runs each), so a bound on their ratio
failed or passed by the load. The switch taking is what the note asserts (it is written only once
a thread moved onto the relay); the issue's 10 % target on a quiet machine is measured by
bench/interleave_vs_strict.py.
Exit 0 when all hold, 1 with the first deviation otherwise."""
import json
import os
import subprocess
import sys
import tempfile

SWITCHED = "from then on the relay put them in turn"
STAYED = "found no relay lane"


def run(whymiss, argv, mode, tmp):
    out = os.path.join(tmp, f"{mode}.json")
    r = subprocess.run([whymiss, "run", "--mode", "exact", "--interleave", mode, "-o",
                        os.path.join(tmp, f"{mode}.data"), "--format", "json", "--output", out,
                        "--"] + argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {mode}: whymiss exited {r.returncode}: {r.stderr.strip()}")
    with open(out) as f:
        rep = json.load(f)
    l1 = rep["totals"]["levels"][0]["misses_by_kind"]
    sharing = l1["true_sharing"]["total"] + l1["false_sharing"]["total"]
    top = (rep["findings"][0]["kind"], rep["findings"][0]["origin"]) if rep["findings"] else None
    notes = [str(n) for n in rep.get("notes", []) + rep.get("collector_notes", [])]
    counted = (rep["totals"]["accesses"], rep["totals"]["dropped_accesses"])
    return top, sharing, any(SWITCHED in n and STAYED not in n for n in notes), counted


def main():
    whymiss, argv = sys.argv[1], [a for a in sys.argv[2:] if a != "--args"]  # (check_run's form)
    with tempfile.TemporaryDirectory() as tmp:
        s_top, s_sharing, s_switched, s_counted = run(whymiss, argv, "strict", tmp)
        p_top, p_sharing, p_switched, p_counted = run(whymiss, argv, "parallel", tmp)
    print(f"strict: {s_top}, {s_sharing} L1 sharing misses; parallel: {p_top}, {p_sharing}"
          f" ({p_sharing / max(s_sharing, 1):.1%}), switched: {p_switched}")
    if s_switched or not p_switched:
        print("FAIL: the parallel run must say all its threads moved to strict order, the strict "
              "run must not")
        return 1
    if p_counted[1] != 0 or p_counted != s_counted:
        print(f"FAIL: accesses (counted, dropped): strict {s_counted}, parallel {p_counted}: the "
              "move lost or doubled some")
        return 1
    if s_top is None or s_top[0] not in ("true_sharing", "false_sharing"):
        print(f"FAIL: strict's top finding is {s_top}, not a sharing one: the threads did not contend")
        return 1
    if p_top != s_top:
        print(f"FAIL: top finding: strict {s_top}, parallel {p_top}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
