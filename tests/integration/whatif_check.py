#!/usr/bin/env python3
"""whatif_check.py: exact mode's what-if predictions (analysis/predict.h) against measured runs.

  fix [--log N] WHYMISS PROG FIXED KIND [ARGS...]
      Records PROG and its fixed twin FIXED with one explicit geometry (PROG with an access log of
      N entries if given, fewer than the run has: the replay must then say it covers the first
      part of the run, and its scaled counts must still hold). PROG's report must have a
      finding of KIND with a replayed predicted_fix whose misses_after is within 10 % (or 1,000
      misses) of FIXED's measured L1 misses, and, when the log held the whole run, whose
      misses_before (the log replayed as recorded) is within 10 % (or 1,000) of PROG's own
      measured L1 misses.
  latent WHYMISS PROG
      PROG is latent_fs.c. 'near 0' must have no false sharing and predict it; the predicted
      placements must be exactly those where running PROG moved there (near OFFSET, or with
      128-byte lines) measures false sharing, each within 10 % of the measured count; by the
      program's layout (a at 40, b at 64) those are offsets 24..56 and 128-byte lines. Each
      case names the object's type (struct near_stats) and thread 1's and 2's fields (sent,
      received), in JSON and in the text report.
  none WHYMISS PROG
      'far 0' of latent_fs.c: the report has an access log and predicts nothing."""
import json
import os
import sys
import tempfile

from reportlib import run

GEOMETRY = "L1=48K:12:64,L2=1M:16:64,L3=32M:16:64"
GEOMETRY_128 = "L1=48K:12:128,L2=1M:16:128,L3=32M:16:128"


def report(whymiss, tmp, prog, args, cache=GEOMETRY, name="p", log=None):
    prof, rep = os.path.join(tmp, name + ".data"), os.path.join(tmp, name + ".json")
    env = dict(os.environ)
    if log is not None:
        env["WHYMISS_ACCESS_LOG"] = str(log)
    r = run(whymiss, "record", "-o", prof, "--cache", cache, "--", prog, *args, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: record {prog} {args}: {r.stderr.strip()}")
    r = run(whymiss, "report", "-i", prof, "--format", "json", "--output", rep)
    if r.returncode != 0:
        sys.exit(f"FAIL: report: {r.stderr.strip()}")
    return json.load(open(rep))


def l1(doc, kind=None):
    lv = doc["totals"]["levels"][0]
    return lv["misses"] if kind is None else lv["misses_by_kind"][kind]["total"]


def close(pred, meas):
    return abs(pred - meas) <= max(0.1 * meas, 1000)


def fix(whymiss, prog, fixed, kind, args, log=None):
    with tempfile.TemporaryDirectory() as tmp:
        d = report(whymiss, tmp, prog, args, name="bug", log=log)
        f = next((f for f in d["findings"] if f["kind"] == kind and "predicted_fix" in f), None)
        if f is None:
            print("FAIL: no", kind, "finding with a predicted fix:",
                  [(x["kind"], x.get("predicted_fix")) for x in d["findings"]])
            return 1
        pf = f["predicted_fix"]
        if not pf["how"].startswith("replayed"):
            print("FAIL: the fix was not replayed:", pf)
            return 1
        if log is not None and log < d["totals"]["accesses"] and "first" not in pf["how"]:
            print(f"FAIL: a log of {log:,} entries cannot hold the run's {d['totals']['accesses']:,} "
                  f"accesses, but the replay does not say it covers a part: {pf['how']}")
            return 1
        t = report(whymiss, tmp, fixed, args, name="fixed")
        before, after = l1(d), l1(t)
        print(f"  {os.path.basename(prog)}: fix '{pf['what']}'")
        print(f"  replayed as recorded {pf['misses_before']:,} vs measured {before:,}; "
              f"predicted after {pf['misses_after']:,} vs the fixed twin's {after:,}")
        # A partial log's prefix need not look like the whole run (threads that start apart),
        # so the unchanged replay is held to the run only when the log held every access.
        if "every access" in pf["how"] and not close(pf["misses_before"], before):
            print("FAIL: the replay does not reproduce the run's L1 misses")
            return 1
        if not close(pf["misses_after"], after):
            print("FAIL: the prediction misses the fixed twin's L1 misses by more than 10 % (or 1,000)")
            return 1
    print("ok: the predicted fix matches the fixed twin")
    return 0


# latent_fs.c's near layout: worker thread 1 updates `sent` (object bytes 40..47), thread 2
# `received` (64..71), each with a read and a write of the whole member.
FIELDS = {1: "sent", 2: "received"}
FIELD_BYTES = {1: "writes 40-47, reads 40-47", 2: "writes 64-71, reads 64-71"}


def fields_wrong(case):
    """Whether a latent case fails to name struct near_stats and each worker's member."""
    if case.get("type") != "struct near_stats":
        print("FAIL: the object's type is", case.get("type"))
        return True
    if len(case.get("fields", [])) != len(case["threads"]):
        print("FAIL: not one field list per thread:", case)
        return True
    by_thread = dict(zip(case["threads"], case["fields"]))
    for t, name in FIELDS.items():
        if by_thread.get(t) != [name]:
            print(f"FAIL: thread {t}'s fields are {by_thread.get(t)}, not ['{name}']")
            return True
    return False


def latent(whymiss, prog):
    with tempfile.TemporaryDirectory() as tmp:
        d = report(whymiss, tmp, prog, ["near", "0"], name="today")
        if l1(d, "false_sharing") >= 64:
            print("FAIL: false sharing at today's placement:", l1(d, "false_sharing"))
            return 1
        pred = {(x["trigger"], x["offset"]): x for x in d.get("latent_false_sharing", [])}
        print("  predicted:", {k: v["predicted_misses"] for k, v in pred.items()})
        measured = {}
        for off in range(8, 64, 8):
            measured[(f"offset {off}", off)] = l1(report(whymiss, tmp, prog, ["near", str(off)], name=f"o{off}"),
                                                  "false_sharing")
        for off in (0, 64):
            measured[("line 128", off)] = l1(report(whymiss, tmp, prog, ["near", str(off)], GEOMETRY_128,
                                                    name=f"l{off}"), "false_sharing")
        print("  measured:", measured)
        today = l1(d, "false_sharing")
        want = {k for k, m in measured.items() if m >= 2 * today + 64}
        by_layout = {(f"offset {o}", o) for o in range(24, 64, 8)} | {("line 128", 0)}
        if want != by_layout:
            print("FAIL: the moved runs do not show the layout's false sharing:", sorted(want))
            return 1
        if set(pred) != want:
            print("FAIL: predicted", sorted(pred), "but measured false sharing at", sorted(want))
            return 1
        for k in want:
            p, m = pred[k]["predicted_misses"], measured[k]
            if abs(p - m) > 0.1 * m:
                print(f"FAIL: {k}: predicted {p} false-sharing misses, measured {m}")
                return 1
            if not {1, 2} <= set(pred[k]["threads"]):
                print("FAIL: the threads are", pred[k]["threads"])
                return 1
            if fields_wrong(pred[k]):
                return 1
        # The text report names them too: each worker's bytes, then its member.
        r = run(whymiss, "report", "-i", os.path.join(tmp, "today.data"))
        for want_text in ("(struct near_stats)", *(f" thread {t} {FIELD_BYTES[t]} ({FIELDS[t]})\n" for t in (1, 2))):
            if want_text not in r.stdout:
                print(f"FAIL: the text report lacks '{want_text}':\n{r.stdout}")
                return 1
    print(f"ok: latent false sharing predicted at exactly the {len(want)} placements that have it, "
          "each within 10 % of the moved run")
    return 0


def none(whymiss, prog):
    with tempfile.TemporaryDirectory() as tmp:
        d = report(whymiss, tmp, prog, ["far", "0"])
        if "latent_false_sharing" not in d:
            print("FAIL: the report has no access log")
            return 1
        if d["latent_false_sharing"]:
            print("FAIL: false sharing predicted where none can be:", d["latent_false_sharing"])
            return 1
    print("ok: no latent false sharing predicted")
    return 0


def main():
    argv = sys.argv[1:]
    log = None
    if len(argv) > 2 and argv[1] == "--log":
        log = int(argv[2])
        del argv[1:3]
    cmd, whymiss = argv[0], argv[1]
    if cmd == "fix":
        return fix(whymiss, argv[2], argv[3], argv[4], argv[5:], log)
    if cmd == "latent":
        return latent(whymiss, argv[2])
    if cmd == "none":
        return none(whymiss, argv[2])
    print("usage: whatif_check.py fix|latent|none ...")
    return 2


if __name__ == "__main__":
    sys.exit(main())
