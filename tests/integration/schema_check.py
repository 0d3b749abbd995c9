#!/usr/bin/env python3
"""schema_check.py WHYMISS SOURCE_DIR [--exact PROG...] [--soft PROG ARGS...] [--diff A B]:
every JSON output of whymiss validates against docs/report.schema.json, and the schema is strict
enough to reject a document with a field renamed, missing or of the wrong type.

Reports: of the golden profiles (tests/golden/*.data, exact and sampled) and of each --exact
program (exact mode) and --soft program (soft mode, unmodified binary) recorded here; simulate
outputs of the example traces; diff outputs of golden pairs and of the --diff programs' profiles.
Then mutated copies of valid documents must fail, and the documents seen must have exercised the
schema's optional parts (cpu_time, sampling, pattern, stride_bytes, l1_misses, ...)."""
import argparse
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_schema  # noqa: E402


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600, **kw)


def paths(doc, prefix=""):
    """Every key path in doc, array indices as [*]."""
    out = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{prefix}/{k}"
            out.add(p)
            out |= paths(v, p)
    elif isinstance(doc, list):
        for v in doc:
            out |= paths(v, prefix + "[*]")
    return out


def report_views(whymiss):
    """The view names `whymiss report --help` lists ("  NAME: summary" after the --view line)."""
    out = run(whymiss, "report", "--help").stdout.splitlines()
    names, listing = [], False
    for line in out:
        if line.startswith("--view NAME"):
            listing = True
        elif listing and line.startswith("  ") and ":" in line:
            names.append(line.split(":", 1)[0].strip())
        elif listing:
            break
    return names


class Checker:
    def __init__(self, whymiss):
        self.whymiss = whymiss
        self.docs = {k: [] for k in report_schema.KINDS}
        self.failures = []

    def output(self, which, label, *args):
        r = run(self.whymiss, *args)
        if r.returncode != 0:
            self.failures.append(f"{label}: whymiss {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
            return
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            self.failures.append(f"{label}: not JSON: {e}")
            return
        self.check(which, label, doc)

    def check(self, which, label, doc):
        errors = report_schema.validate(doc, which)
        if errors:
            self.failures.append(f"{label}: invalid {which}:\n    " + "\n    ".join(errors[:10]))
        self.docs[which].append((label, doc))


# Mutations of a valid document that the schema must reject: (output, description, function that
# changes the document in place and returns False when the document has no such part).
def rename(obj, old, new):
    if not isinstance(obj, dict) or old not in obj:
        return False
    obj[new] = obj.pop(old)
    return True


def drop(obj, key):
    if not isinstance(obj, dict) or key not in obj:
        return False
    del obj[key]
    return True


def first(items, pred=lambda x: True):
    return next((x for x in items if pred(x)), None)


def capacity(d):
    return first(d.get("findings", []), lambda f: f["kind"] == "capacity")


def strided(d):
    return first(d.get("findings", []), lambda f: f.get("pattern") == "strided")


def obj_with_misses(d):
    for f in d.get("findings", []):
        o = first(f["objects"], lambda o: "l1_misses" in o)
        if o:
            return o
    return None


def latent_fields(d):
    """The first latent false-sharing case whose fields the debug information named."""
    return first(d.get("latent_false_sharing", []), lambda x: "fields" in x)


def view_doc(d, name):
    """The document if it is an available view NAME (so a mutation applies to that view only)."""
    return d if d.get("view") == name and d.get("available") else None


def flow_step(d):
    d = view_doc(d, "flow")
    return first([s for g in d["groups"] for s in g["steps"]], lambda s: True) if d else None


def ws_level(d):
    d = view_doc(d, "working-set")
    return d["levels"][0] if d and d["levels"] else None


MUTATIONS = [
    ("report", "schema_version missing", lambda d: drop(d, "schema_version")),
    ("report", "schema_version 2", lambda d: d.update(schema_version=2) or True),
    ("report", "an unknown top-level key", lambda d: d.update(extra=1) or True),
    ("report", "findings renamed", lambda d: rename(d, "findings", "finding")),
    ("report", "findings[*].pattern renamed", lambda d: rename(capacity(d), "pattern", "patern")),
    ("report", "findings[*].pattern missing", lambda d: drop(capacity(d), "pattern")),
    ("report", "findings[*].pattern unknown", lambda d: capacity(d) is not None and capacity(d).update(pattern="zigzag") is None),
    ("report", "findings[*].stride_bytes missing", lambda d: drop(strided(d), "stride_bytes")),
    ("report", "findings[*].evidence renamed", lambda d: bool(d["findings"]) and rename(d["findings"][0], "evidence", "evidences")),
    ("report", "an unknown evidence key", lambda d: bool(d["findings"]) and d["findings"][0]["evidence"].update(hunch=1) is None),
    ("report", "findings[*].share above 1", lambda d: bool(d["findings"]) and d["findings"][0].update(share=1.5) is None),
    ("report", "findings[*].kind unknown", lambda d: bool(d["findings"]) and d["findings"][0].update(kind="bad_luck") is None),
    ("report", "objects[*].l1_misses renamed", lambda d: rename(obj_with_misses(d), "l1_misses", "l1_miss")),
    ("report", "objects[*].l1_misses a string", lambda d: obj_with_misses(d) is not None and obj_with_misses(d).update(l1_misses="12") is None),
    ("report", "instructions[*].frames missing", lambda d: any(drop(i, "frames") for f in d["findings"] for i in f["instructions"][:1])),
    ("report", "source_lines[*].frames empty", lambda d: bool(d["source_lines"]) and d["source_lines"][0].update(frames=[]) is None),
    ("report", "source_lines[*].misses negative", lambda d: bool(d["source_lines"]) and d["source_lines"][0]["misses"].update(L1=-1) is None),
    ("report", "cpu_time.uninstrumented_share missing", lambda d: drop(d.get("cpu_time"), "uninstrumented_share")),
    ("report", "cpu_time.samples a float", lambda d: "cpu_time" in d and d["cpu_time"].update(samples=1.5) is None),
    ("report", "sampling.unit missing", lambda d: drop(d.get("sampling"), "unit")),
    ("report", "totals.levels[*].misses_by_kind.conflict missing", lambda d: drop(d["totals"]["levels"][0]["misses_by_kind"], "conflict")),
    ("report", "findings[*].predicted_fix.misses_after negative", lambda d: any(f["predicted_fix"].update(misses_after=-1) is None for f in d["findings"] if "predicted_fix" in f)),
    ("report", "findings[*].predicted_fix.how unknown", lambda d: any(f["predicted_fix"].update(how="guessed") is None for f in d["findings"] if "predicted_fix" in f)),
    ("report", "latent_false_sharing[*].trigger unknown", lambda d: bool(d.get("latent_false_sharing")) and d["latent_false_sharing"][0].update(trigger="offset 3") is None),
    ("report", "latent_false_sharing[*].threads missing", lambda d: bool(d.get("latent_false_sharing")) and drop(d["latent_false_sharing"][0], "threads")),
    ("report", "latent_false_sharing[*].fields flat", lambda d: latent_fields(d) is not None and latent_fields(d).update(fields=["sent", "received"]) is None),
    ("report", "latent_false_sharing[*].fields without type", lambda d: drop(latent_fields(d), "type")),
    ("view", "flow steps[*].to_kind alloc", lambda d: flow_step(d) is not None and flow_step(d).update(to_kind="alloc") is None),
    ("view", "flow steps[*].handovers missing", lambda d: drop(flow_step(d), "handovers")),
    ("view", "flow charged_unit unknown", lambda d: view_doc(d, "flow") is not None and d.update(charged_unit="cycles") is None),
    ("view", "flow available without groups", lambda d: drop(view_doc(d, "flow"), "groups")),
    ("view", "working-set levels[*].set_step 0", lambda d: ws_level(d) is not None and ws_level(d).update(set_step=0) is None),
    ("view", "working-set lines a float", lambda d: view_doc(d, "working-set") is not None and bool(d["groups"]) and d["groups"][0].update(lines=[[1.5]]) is None),
    ("view", "working-set unavailable without a reason", lambda d: d.get("view") == "working-set" and not d["available"] and drop(d, "unavailable")),
    ("simulate", "miss_ratio renamed", lambda d: rename(d["totals"]["levels"][0], "miss_ratio", "missratio")),
    ("simulate", "policy unknown", lambda d: d.update(policy="fifo") or True),
    ("simulate", "schema_version missing", lambda d: drop(d, "schema_version")),
    ("report", "findings[*].type empty", lambda d: any(f.update(type="") is None for f in d["findings"] if "type" in f)),
    ("report", "findings[*].type a number", lambda d: any(f.update(type=3) is None for f in d["findings"] if "type" in f)),
    ("report", "findings[*].type_how without type",
     lambda d: any(drop(f, "type") for f in d["findings"] if "type_how" in f)),
    ("report", "findings[*].type_how neither counted nor sampled",
     lambda d: any(f.update(type_how="guessed") is None for f in d["findings"] if "type_how" in f)),
    ("view", "types[*].levels[*].by_kind.capacity missing",
     lambda d: d["view"] == "types" and any(drop(t["levels"][0]["by_kind"], "capacity") for t in d["types"][:1])),
    ("view", "types[*].levels[*].share above 1",
     lambda d: d["view"] == "types" and any(t["levels"][0].update(share=1.5) is None for t in d["types"][:1])),
    ("view", "types placement not modelled", lambda d: d["view"] == "types" and d.update(placement="counted") is None),
    ("view", "fields[*].cold missing",
     lambda d: d["view"] == "fields" and any(drop(f, "cold") for t in d["types"] for f in t["fields"][:1])),
    ("view", "fields false_sharing_pairs[*].a renamed",
     lambda d: d["view"] == "fields" and any(rename(fp, "a", "written") for t in d["types"] for fp in t["false_sharing_pairs"][:1])),
    ("view", "fields spatial_use missing", lambda d: d["view"] == "fields" and drop(d, "spatial_use")),
    ("view", "fields spatial_use available without how",
     lambda d: d["view"] == "fields" and d["spatial_use"]["available"] and drop(d["spatial_use"], "how")),
    ("view", "fields spatial_use unavailable without reason",
     lambda d: d["view"] == "fields" and not d["spatial_use"]["available"] and drop(d["spatial_use"], "reason")),
    ("view", "sets: source unknown", lambda d: d["view"] == "sets" and d.update(source="guessed") is None),
    ("view", "sets: levels[*].hot_sets renamed", lambda d: d["view"] == "sets" and bool(d["levels"]) and rename(d["levels"][0], "hot_sets", "hot")),
    ("view", "sets: levels[*].hottest_eighth_share above 1", lambda d: d["view"] == "sets" and bool(d["levels"]) and d["levels"][0].update(hottest_eighth_share=1.5) is None),
    ("view", "sets: rcd.instructions[*].ccprof unknown", lambda d: d["view"] == "sets" and bool(d["rcd"]["instructions"]) and d["rcd"]["instructions"][0].update(ccprof="maybe") is None),
    ("view", "sets: rcd.instructions[*].rcd.cf missing", lambda d: d["view"] == "sets" and bool(d["rcd"]["instructions"]) and drop(d["rcd"]["instructions"][0]["rcd"], "cf")),
    ("report", "mrc.how neither counted, sampled nor partial", lambda d: "mrc" in d and d["mrc"].update(how="guessed") is None),
    ("report", "mrc.rate above 1", lambda d: "rate" in d.get("mrc", {}) and d["mrc"].update(rate=1.5) is None),
    ("report", "mrc.dropped negative", lambda d: "dropped" in d.get("mrc", {}) and d["mrc"].update(dropped=-1) is None),
    ("report", "mrc.dropped a float", lambda d: "dropped" in d.get("mrc", {}) and d["mrc"].update(dropped=0.5) is None),
    ("report", "mrc_other_lines[*].line missing", lambda d: any(drop(m, "line") for m in d.get("mrc_other_lines", [])[-1:])),
    ("report", "mrc_other_lines[*].rate 0", lambda d: any(m.update(rate=0) is None for m in d.get("mrc_other_lines", [])[-1:] if "rate" in m)),
    ("view", "sets: an unknown key", lambda d: d["view"] == "sets" and d.update(extra=1) is None),
    ("diff", "same_cache missing", lambda d: drop(d, "same_cache")),
    ("diff", "findings[*].verdict unknown", lambda d: bool(d["findings"]) and d["findings"][0].update(verdict="fixd") is None),
    ("diff", "objects[*].l1_misses_after renamed", lambda d: bool(d["objects"]) and rename(d["objects"][0], "l1_misses_after", "after")),
]

# Optional parts of the schema that the documents above must have exercised, so the validation is
# not vacuous.
MUST_SEE = {
    "report": ["/cpu_time/uninstrumented_modules", "/sampling/trace", "/collector_notes",
               "/findings[*]/pattern", "/findings[*]/stride_bytes", "/findings[*]/support",
               "/findings[*]/objects[*]/l1_misses", "/findings[*]/objects[*]/alloc_site",
               "/findings[*]/objects[*]/name", "/findings[*]/instructions[*]/frames",
               "/findings[*]/evidence/words_per_thread", "/source_lines[*]/frames", "/totals/unit",
               "/findings[*]/predicted_fix", "/findings[*]/predicted_fix/cache_size",
               "/latent_false_sharing[*]/bytes", "/latent_false_sharing[*]/type",
               "/latent_false_sharing[*]/fields", "/findings[*]/type_how", "/mrc/rate", "/mrc/dropped",
               "/mrc_other_lines[*]/line", "/mrc_other_lines[*]/rate"],
    "simulate": ["/totals/levels[*]/misses_by_kind/false_sharing"],
    "diff": ["/findings[*]/verdict", "/source_lines[*]/name", "/objects[*]/name"],
    "view": ["/groups[*]/steps[*]/from_kind", "/groups[*]/path[*]/thread", "/groups[*]/lines",
             "/levels[*]/set_step", "/unavailable"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("whymiss")
    ap.add_argument("source_dir")
    ap.add_argument("--exact", nargs="*", default=[])
    ap.add_argument("--soft", nargs="+", default=[], help="PROGRAM [ARGS...] run in soft mode")
    ap.add_argument("--diff", nargs=2, default=None, help="two programs whose profiles to diff")
    a = ap.parse_args()
    c = Checker(a.whymiss)

    golden = sorted(glob.glob(os.path.join(a.source_dir, "tests", "golden", "*.data")))
    if not golden:
        print("FAIL: no golden profiles in", a.source_dir)
        return 1
    for g in golden:
        name = os.path.basename(g)
        c.output("report", name, "report", "-i", g, "--format", "json")
        with open(g[:-len(".data")] + ".json") as f:  # the checked-in expected report too
            c.check("report", name[:-len(".data")] + ".json", json.load(f))
    views = report_views(a.whymiss)
    for g in golden:
        for v in views:
            c.output("view", f"{os.path.basename(g)} --view {v}", "report", "-i", g, "--view", v, "--format", "json")
    for x, y in zip(golden, golden[1:] + golden[:1]):
        c.output("diff", f"diff {os.path.basename(x)} {os.path.basename(y)}", "diff", x, y, "--format", "json")

    for t in sorted(glob.glob(os.path.join(a.source_dir, "examples", "*.trace"))):
        c.output("simulate", os.path.basename(t), "simulate", t, "--format", "json")
        c.output("simulate", os.path.basename(t) + " --cores 1 --policy plru", "simulate", t, "--format", "json",
                 "--cores", "1", "--cache", "L1=32K:8:64,L2=1M:16:64", "--policy", "plru", "--llc", "non-inclusive")

    with tempfile.TemporaryDirectory() as tmp:
        runs = [("exact", p, []) for p in a.exact]
        if a.soft:
            runs.append(("soft", a.soft[0], a.soft[1:]))
        profiles = {}
        for i, (mode, prog, args) in enumerate(runs):
            prof = os.path.join(tmp, f"{i}.data")
            r = run(a.whymiss, "record", "--mode", mode, "-o", prof, "--", prog, *args)
            if r.returncode != 0:
                c.failures.append(f"record --mode {mode} {prog}: exited {r.returncode}: {r.stderr.strip()}")
                continue
            profiles[prog] = prof
            c.output("report", f"{mode} {os.path.basename(prog)}", "report", "-i", prof, "--format", "json")
            for v in views:
                c.output("view", f"{mode} {os.path.basename(prog)} --view {v}", "report", "-i", prof, "--view", v,
                         "--format", "json")
        if a.diff:
            for prog in a.diff:
                if prog not in profiles:
                    prof = os.path.join(tmp, f"d{len(profiles)}.data")
                    r = run(a.whymiss, "record", "-o", prof, "--", prog)
                    if r.returncode != 0:
                        c.failures.append(f"record {prog}: exited {r.returncode}: {r.stderr.strip()}")
                        continue
                    profiles[prog] = prof
            if all(p in profiles for p in a.diff):
                x, y = (profiles[p] for p in a.diff)
                c.output("diff", "diff of the --diff programs", "diff", x, y, "--format", "json")
                c.output("diff", "diff of the --diff programs, reversed", "diff", y, x, "--format", "json")

    for which, wanted in MUST_SEE.items():
        seen = set()
        for _, doc in c.docs[which]:
            seen |= paths(doc)
        for p in wanted:
            if p not in seen:
                c.failures.append(f"no {which} output had {p}: the schema's coverage is not tested")

    for which, what, mutate in MUTATIONS:
        applied = 0
        for label, doc in c.docs[which]:
            d = copy.deepcopy(doc)
            if not mutate(d):
                continue
            applied += 1
            if not report_schema.validate(d, which):
                c.failures.append(f"{label} with {what} still validates")
        if applied == 0:
            c.failures.append(f"no {which} output to mutate with {what}")

    if c.failures:
        print("FAIL:\n  " + "\n  ".join(c.failures))
        return 1
    n = sum(len(v) for v in c.docs.values())
    print(f"ok: {n} JSON outputs valid ({', '.join(f'{len(v)} {k}' for k, v in c.docs.items())}); "
          f"{len(MUTATIONS)} kinds of mutation rejected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
