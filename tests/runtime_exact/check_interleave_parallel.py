#!/usr/bin/env python3
"""check_interleave_parallel.py WHYMISS PROGRAM: PROGRAM is bench/private_threads.c built with
whymiss-cc (threads sweeping arrays of their own). Under `whymiss run --mode exact` with
WHYMISS_INTERLEAVE=parallel (the default: each thread simulates its own accesses on its own
simulated core, lock-free; docs/parallel-sim.md) every access is counted, none is dropped, and
the misses per level and kind are those of the strict relay (nothing is shared, so the
interleaving cannot matter beyond the few lines the main thread and the workers both touch: at
most 4 misses apart per level and kind, and per heap object, charged to the same threads), for
1, 2 and 4 threads; the report says the threads were interleaved in host order and did not move
to strict order (they never contend). Parallel mode has 64 simulated cores, one per thread at a
time: 100 workers in waves of 10 are all recorded (a thread past the 64th takes the core of one
that ended), with strict's accesses and misses (each thread's own array: a core's earlier lines
cannot make them hit), also once the run moved to strict order (WHYMISS_STRICT_AFTER: the relay
gives an ended thread's core back); 66 workers at once leave three threads unrecorded, and the
report says so and names --interleave strict. Exit 0 when all hold, 1 with the first deviation
otherwise."""
import json
import os
import subprocess
import sys
import tempfile

CACHE = "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"
NOTE = "in parallel (--interleave parallel"
SWITCHED = "from then on the relay put them in turn"  # (sharing misses moved it to strict order)


def run(whymiss, program, mode, threads, tmp, passes=30, kib=64, wave=None, strict_after=None):
    env = dict(os.environ)
    env["WHYMISS_INTERLEAVE"] = mode
    if strict_after:
        env["WHYMISS_STRICT_AFTER"] = str(strict_after)
    out = os.path.join(tmp, f"{mode}{threads}.json")
    r = subprocess.run([whymiss, "run", "--mode", "exact", "--cache", CACHE, "--format", "json",
                        "--output", out, "--", program, str(threads), str(passes), str(kib)]
                       + ([str(wave)] if wave else []),
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {mode}, {threads} threads: whymiss exited {r.returncode}: "
                         f"{r.stderr.strip()}")
    with open(out) as f:
        text = f.read()
    if (SWITCHED in text) != bool(strict_after):
        raise SystemExit(f"FAIL: {mode}, {threads} threads: the run "
                         + ("moved to strict order, but the threads share nothing" if not strict_after
                            else "did not move to strict order after WHYMISS_STRICT_AFTER accesses"))
    return json.loads(text), NOTE in text


def kinds(report):
    return {(lv["name"], k): v["total"] for lv in report["totals"]["levels"]
            for k, v in lv["misses_by_kind"].items()}


def same_counts(where, strict, par, slack):
    """None when parallel counted every access and strict's misses per level and kind (each within
    slack(strict's count)), else the first difference."""
    if par["totals"]["dropped_accesses"] != 0:
        return f"{where}: parallel dropped {par['totals']['dropped_accesses']} accesses"
    if par["totals"]["accesses"] != strict["totals"]["accesses"]:
        return (f"{where}: parallel counted {par['totals']['accesses']} accesses, "
                f"strict {strict['totals']['accesses']}")
    a, b = kinds(strict), kinds(par)
    for key in a:
        if abs(a[key] - b.get(key, -10**9)) > slack(a[key]):
            return f"{where}: {key[0]} {key[1]} misses: strict {a[key]}, parallel {b.get(key)}"
    return None


def main():
    whymiss, program = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        for threads in (1, 2, 4):
            strict, strict_note = run(whymiss, program, "strict", threads, tmp)
            par, par_note = run(whymiss, program, "parallel", threads, tmp)
            where = f"{threads} thread(s)"
            diff = same_counts(where, strict, par, lambda n: 4)
            if diff:
                print(f"FAIL: {diff}")
                return 1
            a = kinds(strict)
            # Per heap object (each thread's array: the thread's object cache, without locks,
            # in parallel mode), the misses charged to it, and by which threads.
            objs = [sorted((tuple(o.get("threads", [])), o["l1_misses"]) for f in rep["findings"]
                           for o in f.get("objects", [])) for rep in (strict, par)]
            if len(objs[0]) != len(objs[1]) or len(objs[0]) < threads or any(
                    x[0] != y[0] or abs(x[1] - y[1]) > 4 for x, y in zip(*objs)):
                print(f"FAIL: {where}: objects (threads, L1 misses): strict {objs[0]}, "
                      f"parallel {objs[1]}")
                return 1
            if a[("L1", "capacity")] < 1000 * threads:
                print(f"FAIL: {where}: only {a[('L1', 'capacity')]} L1 capacity misses: the "
                      "program did not sweep its arrays")
                return 1
            if threads > 1 and (not par_note or strict_note):
                print(f"FAIL: {where}: host-order note {'absent' if not par_note else 'present'} "
                      f"under parallel, {'present' if strict_note else 'absent'} under strict")
                return 1
        # 101 threads, at most 11 at once: every one gets a core (the main thread's, or that of a
        # worker of an earlier wave), every access is counted, and the misses are strict's.
        strict = run(whymiss, program, "strict", 100, tmp, passes=2, kib=64, wave=10)[0]
        par = run(whymiss, program, "parallel", 100, tmp, passes=2, kib=64, wave=10)[0]
        diff = same_counts("100 threads in waves of 10", strict, par, lambda n: 8 + n // 200)
        if diff or "not recorded" in json.dumps(par):
            print(f"FAIL: {diff or '100 threads in waves of 10: a note that threads were not recorded'}")
            return 1
        # The same once the program moved to strict order (WHYMISS_STRICT_AFTER): an exited
        # thread's core goes back to the pool when the relay retires its lane.
        moved = run(whymiss, program, "parallel", 100, tmp, passes=2, kib=64, wave=10,
                    strict_after=1000)[0]
        diff = same_counts("100 threads in waves of 10, moved to strict order", strict, moved,
                           lambda n: 8 + n // 200)
        if diff or "not recorded" in json.dumps(moved):
            print(f"FAIL: {diff or '100 threads in waves of 10, moved to strict order: threads not recorded'}")
            return 1
        # Parallel mode simulates at most 64 threads at once (one lock-free core each): of 67 at
        # once (the main thread and 66 workers) three are not recorded, and the report says so.
        par, _ = run(whymiss, program, "parallel", 66, tmp, passes=1, kib=4)
        text = json.dumps(par)
        if par["totals"]["dropped_accesses"] == 0 or "3 threads were not recorded" not in text \
                or "--interleave strict records up to 1024" not in text:
            print("FAIL: 66 threads at once in parallel mode: no dropped accesses, or no note that "
                  "3 threads were not recorded and what records them")
            return 1
    print("ok: WHYMISS_INTERLEAVE=parallel counts private work as the strict relay does")
    return 0


if __name__ == "__main__":
    sys.exit(main())
