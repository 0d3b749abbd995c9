#!/usr/bin/env python3
"""check_handed_locks.py WHYMISS HANDED_LOCKS: parallel mode's rule for threads that take turns
(docs/parallel-sim.md, "Strict from the first contention"), with WHYMISS_TURNS=1 acting as if
they always did, so that the verdicts do not depend on how the host ran the threads:
- `handed_locks handed` and `handed_locks long`: every sharing miss comes after taking a mutex
  another thread released last (ordered by the lock): `handed`, inside the critical section or
  a few accesses after it; `long`, inside it, over 8 Ki accesses after the lock was taken;
  `handed_locks join`: right after a thread's start, or
  after a pthread_join: each run must stay in parallel mode, and count at least 8 sharing misses
  (with two threads, one of them made the rule's 4; join's main thread makes about 800 of its
  1,100: the check is not vacuous);
- `handed_locks own`: false sharing under locks nobody hands over: the run must move to strict
  order, and by the turns rule (the report's note says which rule moved it).
Exit 0 when both hold, 1 otherwise."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from check_interleave_switch import run as run_report  # noqa: E402


TURNS = "sharing misses while threads took turns"  # (the note's words for the turns rule)


def run(whymiss, prog, mode, iters):
    """(L1 sharing misses, whether the run moved to strict order, whether the turns rule moved
    it) of one parallel-mode run."""
    with tempfile.TemporaryDirectory() as tmp:
        _, sharing, moved, _ = run_report(whymiss, [prog, mode, "2", str(iters)], "parallel", tmp)
        with open(os.path.join(tmp, "parallel.json")) as f:
            rep = json.load(f)
    by_turns = any(TURNS in str(n) for n in rep.get("notes", []) + rep.get("collector_notes", []))
    return sharing, moved, by_turns


def main():
    whymiss, prog = sys.argv[1], sys.argv[2]
    os.environ["WHYMISS_TURNS"] = "1"  # (inherited by every run)
    runs = {mode: run(whymiss, prog, mode, iters)
            for mode, iters in (("handed", 3000), ("long", 300), ("join", 100), ("own", 3000))}
    print("; ".join(f"{m}: {s} L1 sharing misses, moved: {v} (by the turns rule: {t})"
                    for m, (s, v, t) in runs.items()))
    for mode in ("handed", "long", "join"):
        sharing, moved, _ = runs[mode]
        if sharing < 8:
            print(f"FAIL: {mode}: fewer than 8 sharing misses: the threads did not share")
            return 1
        if moved:
            print(f"FAIL: {mode}: sharing ordered by a hand-over moved the run to strict order")
            return 1
    _, o_moved, o_by_turns = runs["own"]
    if not o_moved or not o_by_turns:
        print("FAIL: false sharing under locks nobody hands over did not move the run to strict "
              "order by the turns rule")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
