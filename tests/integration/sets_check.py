#!/usr/bin/env python3
"""sets_check.py WHYMISS CONFLICTED PADDED: the `sets` view on set_walk.c and its padded twin
(tests/integration/sets/set_walk.c derives the answers), with a 32 KiB 8-way 64-byte L1 (64
sets) given explicitly. The conflicted walk: L1's hot sets are exactly 0 and 1 with about half
the misses each, and walk()'s re-conflict distances are short (cf >= 0.99: 2 of its 1,024
distances a pass are long), CCProf's verdict "conflict", whymiss's kind conflict. The padded
twin: misses on all 64 sets (two each), no hot set, walk()'s 64 distances all 62 (cf 0, "no
conflict"). WHYMISS_SETS=0 leaves the counts out and the view says so."""
import json
import os
import sys
import tempfile

from reportlib import run

CACHE = "L1=32K:8:64,L2=256K:8:64"


def view(whymiss, prog, tmp, name, env=None):
    prof = os.path.join(tmp, name + ".data")
    r = run(whymiss, "record", "-o", prof, "--cache", CACHE, "--", prog, env=env)
    if r.returncode != 0:
        raise SystemExit("FAIL: record " + prog + ": " + r.stderr.strip())
    out = {}
    for fmt in ("json", "text"):
        r = run(whymiss, "report", "-i", prof, "--view", "sets", "--format", fmt)
        if r.returncode != 0:
            raise SystemExit("FAIL: report --view sets: " + r.stderr.strip())
        out[fmt] = r.stdout
    return json.loads(out["json"]), out["text"]


def walk_of(doc):
    for i in doc["rcd"]["instructions"]:
        if i["function"] == "walk":
            return i
    raise SystemExit("FAIL: no re-conflict distances for walk(): " + json.dumps(doc["rcd"]))


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("  ok:", what)


def main():
    whymiss, conflicted, padded = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        doc, text = view(whymiss, conflicted, tmp, "c")
        check(doc["source"] == "counted", "exact mode's per-set numbers are counted")
        l1 = doc["levels"][0]
        check(l1["sets"] == 64 and l1["name"] == "L1", "L1 has the 64 sets asked for")
        hot = sorted(h["set"] for h in l1["hot_sets"])
        check(hot == [0, 1], f"conflicted: the hot L1 sets are 0 and 1 (got {hot})")
        check(all(0.45 <= h["share"] <= 0.55 for h in l1["hot_sets"]), "each carries about half the misses")
        check(l1["hottest_eighth_share"] >= 0.99, f"the hottest 1/8 of sets take >= 99% ({l1['hottest_eighth_share']})")
        w = walk_of(doc)
        check(w["rcd"]["cf"] >= 0.99 and w["ccprof"] == "conflict",
              f"walk()'s distances are short: cf {w['rcd']['cf']}, CCProf {w['ccprof']}")
        check(w["rcd"]["median"]["low"] == 0, "walk()'s median distance is 0")
        check(w["kinds"]["conflict"] >= 0.99 * w["l1_misses"], "whymiss calls walk()'s misses conflict")
        fs = [f for f in doc["rcd"]["findings"] if f["kind"] == "conflict"]
        check(fs and fs[0]["ccprof"] == "conflict", "the conflict finding has CCProf's verdict conflict")
        check("hot sets" in text and "CCProf" in text, "the text names the hot sets and CCProf's verdict")
        check(max(len(l) for l in text.splitlines()) <= 100, "the text fits 100 columns")

        doc, text = view(whymiss, padded, tmp, "p")
        l1 = doc["levels"][0]
        check(l1["hot_sets"] == [], "padded: no hot L1 set")
        check(l1["sets_with_misses"] == 64 and l1["misses"] == 128,
              f"padded: 128 misses on all 64 sets ({l1['misses']} on {l1['sets_with_misses']})")
        w = walk_of(doc)
        check(w["rcd"]["cf"] == 0 and w["ccprof"] == "no conflict",
              f"padded: walk()'s distances are long: cf {w['rcd']['cf']}, CCProf {w['ccprof']}")
        check(w["rcd"]["median"]["low"] == 32, "padded: walk()'s median distance is in 32-63 (62)")

        doc, text = view(whymiss, conflicted, tmp, "off", env=dict(os.environ, WHYMISS_SETS="0"))
        check(doc["levels"] == [] and doc["rcd"]["instructions"] == [], "WHYMISS_SETS=0: nothing counted")
        check("no per-set counts" in text, "WHYMISS_SETS=0: the text says so")
    print("ok: the sets view finds the conflicted walk and clears its padded twin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
