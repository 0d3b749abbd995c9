#!/usr/bin/env python3
"""Soft mode vs exact mode on the differential corpus (tests/corpus): how often does soft mode's
top finding (kind, origin) agree with exact mode's, which simulates every access?

  bench/soft_vs_exact.py                           # the whole corpus, 5 soft runs per program
  bench/soft_vs_exact.py --family perthread --repeats 3
  bench/soft_vs_exact.py --only chase_mov_2L2 stride_col_pow2_heap_mid --markdown
  bench/soft_vs_exact.py --json build/corpus/results.json
  bench/soft_vs_exact.py --from-json build/corpus/results.json --markdown   # reprint, run nothing

Steps: generate the corpus into OUT/src (tests/corpus/gen.py, for this machine's caches or
--cache), build every program with whymiss-cc (exact) and gcc (native, for soft mode)
(tests/corpus/build.py), run exact mode once per program at its exact scale (the oracle: its top
finding's kind/origin/level, or none), calibrate a soft scale from native runs (about
--soft-seconds of CPU), then run soft mode --repeats times per program, one run at a time: the
sharing verdicts depend on threads really running at once, so nothing runs in parallel.

Oracle check: the corpus's mutex programs count their own lock hand-overs (a tenure following
another thread's) and print them; where exact mode's share of hand-overs differs from each of
three native runs' by more than 4x, exact mode's interleaving may have changed what decides the
program's sharing verdict, and the figures are also given without those programs (both are
printed). The oracle runs with --oracle-env (default WHYMISS_INTERLEAVE=strict, the reference
order, and WHYMISS_RELAY_NICE=5: the relay thread yields its core to program threads that wake, so that on a machine with fewer cores than
threads plus one the program's threads overlap, and hand over their locks, more nearly as often
as natively; at the relay's default priority they take turns, bench/README.md "The relay's
priority"), and nothing else: a WHYMISS_RELAY_NICE or WHYMISS_INTERLEAVE of the caller's is not
passed on.

Oracle results are cached in OUT/oracle.json, keyed by the program's source hash, exact scale,
cache geometry, --oracle-env, the whymiss binary's build time and its runtime's hash;
calibrations in OUT/calibration.json, keyed by the native binary's hash. Both modes get the
geometry the corpus was generated for (--cache). A run that fails or times out counts as an
"error" verdict (the first line of its stderr is printed). Progress goes to stderr, the results
to stdout.
"""
import argparse
import collections
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "corpus"))
import build as corpus_build  # noqa: E402
import corpuslib  # noqa: E402
from corpuslib import ERROR, NONE, Verdict  # noqa: E402

FAMILIES = ["chase", "stride", "reuse", "random", "perthread", "shared", "control"]
KIND_ABBR = {"false_sharing": "FS", "true_sharing": "TS", "conflict": "conflict",
             "capacity": "capacity"}
ORIGIN_ABBR = {"application": "app", "allocator": "alloc"}


def abbr(key):
    if key in (NONE, ERROR):
        return key
    kind, origin = key.split("/", 1)
    return f"{KIND_ABBR.get(kind, kind)}-{ORIGIN_ABBR.get(origin, origin)}"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def modal(keys):
    """Most common key; ties go to the first seen."""
    counts = collections.Counter(keys)
    best = max(counts.values())
    return next(k for k in keys if counts[k] == best)


def handover_share(stdout):
    """The share of lock acquisitions that changed hands, from a corpus program's own count
    ("NAME COUNTER handovers=N": the mutex programs count them in their critical section), or
    None when the program does not count them."""
    parts = (stdout or "").split()
    try:
        total = int(parts[1])
        n = next(int(x.split("=", 1)[1]) for x in parts if x.startswith("handovers="))
    except (IndexError, ValueError, StopIteration):
        return None
    return n / total if total > 0 else None


def oracle_check(p, runs, native, timeout):
    """Whether exact mode's runs kept the program's lock hand-overs as they are natively. A
    contended lock's sharing verdict depends on how often it changed hands, and exact mode's
    interleaving of the threads can change that: when exact mode's share of hand-overs (the
    median over the oracle's runs) differs by more than HANDOVER_FACTOR, either way, from each of
    three native runs' (same scale), the oracle may not measure the program and the reason is
    returned (else ""). Also returns the native median and the exact share (None when not
    counted)."""
    ex = [h for h in (handover_share(r.stdout) for r in runs if not r.error) if h is not None]
    if not ex:
        return "", None, None
    nat = []
    for _ in range(3):
        rc, out, _, _, _ = corpuslib.run_group([native, str(p["exact_scale"])], timeout)
        h = handover_share(corpuslib.first_line(out)) if rc == 0 else None
        if h is not None:
            nat.append(h)
    e = statistics.median(ex)
    if not nat:
        return "", None, e
    floor = 1e-5  # below one hand-over in 100,000 acquisitions both count as none
    ratios = [max(n, floor) / max(e, floor) for n in nat]
    n = statistics.median(nat)
    if all(r > HANDOVER_FACTOR for r in ratios) or all(r < 1 / HANDOVER_FACTOR for r in ratios):
        return (f"the lock changed hands in {min(nat):.2%}-{max(nat):.2%} of acquisitions natively "
                f"but {e:.2%} under exact mode"), n, e
    return "", n, e


HANDOVER_FACTOR = 4


def git_commit():
    """HEAD when the run starts, '+dirty' if tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("+dirty" if dirty else "") if head else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--whymiss", default=os.path.join(REPO, "build", "bin", "whymiss"))
    ap.add_argument("--whymiss-cc", help="default: whymiss-cc beside --whymiss")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "corpus"),
                    help="corpus sources in OUT/src, binaries, caches (default build/corpus)")
    ap.add_argument("--cache", help="generate for this geometry instead of sysfs's "
                                    "(e.g. L1=32K:8:64,L2=512K:8:64,L3=16M:16:64)")
    ap.add_argument("--no-gen", action="store_true", help="use OUT/src as it is")
    ap.add_argument("--family", action="append", choices=FAMILIES, help="repeatable")
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--repeats", type=int, default=5, help="soft runs per program (default 5)")
    ap.add_argument("--oracle-repeats", type=int, default=1,
                    help="exact runs per program; the oracle is their most common verdict and "
                         "disagreeing runs are reported as unstable (default 1)")
    ap.add_argument("--oracle-repeats-threaded", type=int, default=3,
                    help="exact runs per multi-threaded program, at least --oracle-repeats: "
                         "whether a lock contends can depend on how the threads overlapped, and "
                         "so can exact mode's verdict (default 3)")
    ap.add_argument("--refresh-oracle", action="store_true", help="ignore cached exact runs")
    ap.add_argument("--oracle-env", action="append", metavar="K=V",
                    help="set for the exact runs (repeatable; default WHYMISS_INTERLEAVE=strict and WHYMISS_RELAY_NICE=5; "
                         "--oracle-env '' for none)")
    ap.add_argument("--soft-seconds", type=float, default=2.0,
                    help="calibrate each soft scale to about this much CPU time natively")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="use the manifest's suggested soft scales")
    ap.add_argument("--exact-only", action="store_true",
                    help="only the oracle: exact mode's verdicts (with --oracle-repeats, its "
                         "stability), no soft runs")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run (default 300)")
    ap.add_argument("--markdown", action="store_true", help="print tables in Markdown")
    ap.add_argument("--json", metavar="FILE", help="write every run's result here")
    ap.add_argument("--from-json", metavar="FILE",
                    help="print the results a --json FILE holds (with --markdown: as Markdown), "
                         "run nothing")
    a = ap.parse_args()
    if a.from_json:
        saved = load_json(a.from_json)
        if "programs" not in saved:
            sys.exit(f"soft_vs_exact.py: no results in {a.from_json}")
        (print_markdown if a.markdown else print_text)(saved["programs"], saved["summary"])
        return 0
    if a.repeats < 1 or a.oracle_repeats < 1 or a.oracle_repeats_threaded < 1:
        ap.error("--repeats, --oracle-repeats and --oracle-repeats-threaded must be >= 1")
    for kv in a.oracle_env or []:
        if kv and (kv.startswith("=") or "=" not in kv):
            ap.error(f"--oracle-env '{kv}' is not K=V")
    whymiss = os.path.abspath(a.whymiss)
    whymiss_cc = os.path.abspath(a.whymiss_cc or os.path.join(os.path.dirname(whymiss),
                                                              "whymiss-cc"))
    for tool in (whymiss, whymiss_cc):
        if not os.access(tool, os.X_OK):
            sys.exit(f"soft_vs_exact.py: {tool} not found (build first: scripts/build.sh)")
    out = os.path.abspath(a.out)
    src = os.path.join(out, "src")
    t_start = time.perf_counter()
    commit = git_commit()

    # 1. Generate and build.
    if not a.no_gen:
        cmd = [sys.executable, os.path.join(REPO, "tests", "corpus", "gen.py"), src]
        if a.cache:
            cmd += ["--cache", a.cache]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"soft_vs_exact.py: gen.py failed: {r.stderr.strip()}")
        log(r.stdout.strip())
    manifest = corpus_build.load_manifest(src)
    cache_spec = manifest["cache_spec"]
    progs = corpus_build.select(manifest["programs"], a.only, a.family)
    if not progs:
        sys.exit("soft_vs_exact.py: no program selected")
    try:
        paths = corpus_build.build(src, out, progs, whymiss_cc, quiet=True)
    except RuntimeError as e:
        sys.exit(f"soft_vs_exact.py: build failed:\n{e}")
    log(f"built {len(progs)} programs (exact and native) in {out}")

    # 2. The oracle: exact mode.
    oracle_path = os.path.join(out, "oracle.json")
    oracle_cache = {} if a.refresh_oracle else load_json(oracle_path)
    # The oracle depends on the runtime as much as on the CLI: both are in the key (the
    # runtime by content: relinking the same code keeps the cache).
    rt = os.path.join(os.path.dirname(os.path.dirname(whymiss)), "lib", "libwhymiss-rt.so")
    whymiss_stamp = f"{os.path.getmtime(whymiss):.0f}" + (
        f"+{file_sha(rt)[:16]}" if os.path.exists(rt) else "")
    oracle_env = dict(kv.split("=", 1) for kv in
                      (a.oracle_env or ["WHYMISS_INTERLEAVE=strict", "WHYMISS_RELAY_NICE=5"]) if kv)
    for k in ("WHYMISS_RELAY_NICE", "WHYMISS_INTERLEAVE"):
        os.environ.pop(k, None)  # only --oracle-env's reach the oracle
    if oracle_env:
        whymiss_stamp += ":" + ",".join(f"{k}={v}" for k, v in sorted(oracle_env.items()))
    exact = {}
    exact_unstable = {}
    t_exact = 0.0
    exact_runs_done = 0
    for i, p in enumerate(progs):
        key = f"{p['sha256']}:{p['exact_scale']}:{cache_spec}:{whymiss_stamp}"
        runs = [Verdict.from_json(d) for d in oracle_cache.get(key, {}).get("runs", [])]
        want = max(a.oracle_repeats, a.oracle_repeats_threaded) if p["threads"] > 1 else a.oracle_repeats
        while len(runs) < want:
            v = corpuslib.run_whymiss(whymiss, "exact", paths[p["name"]]["exact"],
                                      p["exact_scale"], cache_spec, a.timeout, env=oracle_env)
            t_exact += v.wall
            exact_runs_done += 1
            runs.append(v)
            if not v.error:  # a failed or timed-out run is retried next time, not cached
                cached = oracle_cache.setdefault(key, {"name": p["name"], "runs": []})
                cached["runs"].append(v.to_json())
                save_json(oracle_path, oracle_cache)
            err = f"  ({v.error})" if v.error else ""
            log(f"[exact {i + 1}/{len(progs)}] {p['name']}: {v.full} {v.wall:.1f}s{err}")
        runs = runs[:want]
        keys = [r.key for r in runs]
        m = modal(keys)
        exact[p["name"]] = next(r for r in runs if r.key == m)
        exact[p["name"]].all_runs = runs
        if len(set(keys)) > 1:
            exact_unstable[p["name"]] = keys

    # 2b. Where a program counts its lock hand-overs, did exact mode keep them?
    oracle_checks = {}
    for p in progs:
        why, nat, ex = oracle_check(p, exact[p["name"]].all_runs, paths[p["name"]]["native"],
                                    min(a.timeout, 120))
        if nat is not None or ex is not None:
            oracle_checks[p["name"]] = {"unreliable": why, "handovers_native": nat,
                                        "handovers_exact": ex}
            ratio = f", ratio {nat / max(ex, 1e-5):.2g}" if nat is not None and ex is not None else ""
            log(f"[oracle check] {p['name']}: hand-overs native "
                f"{'-' if nat is None else f'{nat:.2%}'}, exact {'-' if ex is None else f'{ex:.2%}'}{ratio}"
                + (f": UNRELIABLE ({why})" if why else ""))

    if a.exact_only:
        print_exact(progs, exact, exact_unstable, time.perf_counter() - t_start, a.markdown)
        return 0

    # 3. Soft scales.
    scales = {}
    t_cal = time.perf_counter()
    cal_path = os.path.join(out, "calibration.json")
    cal_cache = load_json(cal_path)
    for p in progs:
        if a.no_calibrate:
            scales[p["name"]] = p["soft_scale"]
            continue
        native = paths[p["name"]]["native"]
        key = f"{file_sha(native)}:{a.soft_seconds}"
        if key not in cal_cache:
            try:
                s, detail = corpuslib.calibrate(native, p["exact_scale"], a.soft_seconds,
                                                min(a.timeout, 120))
            except (RuntimeError, OSError) as e:
                log(f"[calibrate] {p['name']}: {e}; using the manifest's {p['soft_scale']}")
                s, detail = p["soft_scale"], {"error": str(e)}
            cal_cache[key] = {"name": p["name"], "scale": s, **detail}
            save_json(cal_path, cal_cache)
            log(f"[calibrate] {p['name']}: scale {s} (manifest {p['soft_scale']})")
        scales[p["name"]] = cal_cache[key]["scale"]
    t_cal = time.perf_counter() - t_cal

    # 4. Soft mode, one run at a time; all programs once per round.
    soft = {p["name"]: [] for p in progs}
    t_soft = 0.0
    for rnd in range(a.repeats):
        for i, p in enumerate(progs):
            v = corpuslib.run_whymiss(whymiss, "soft", paths[p["name"]]["native"],
                                      scales[p["name"]], cache_spec, a.timeout)
            t_soft += v.wall
            soft[p["name"]].append(v)
            err = f"  ({v.error})" if v.error else ""
            log(f"[soft {rnd + 1}/{a.repeats} {i + 1}/{len(progs)}] {p['name']}: {v.full} "
                f"{v.wall:.1f}s cpu {v.cpu:.1f}s{err}")
    t_total = time.perf_counter() - t_start

    # 5. Results.
    rows = []
    for p in progs:
        ex = exact[p["name"]]
        sv = soft[p["name"]]
        keys = [v.key for v in sv]
        rows.append({
            "name": p["name"], "family": p["family"], "threads": p["threads"],
            "exact": ex.key, "exact_full": ex.full, "exact_share": ex.share,
            "exact_runs": [r.key for r in ex.all_runs],
            "exact_stdout": ex.stdout,
            "soft": keys, "soft_full": [v.full for v in sv],
            # An error never agrees, not even with an exact run that failed too.
            "agree": sum(k == ex.key != ERROR for k in keys),
            "agree_level": sum(v.full == ex.full and v.key != ERROR for v in sv),
            "stable": len(set(keys)) == 1,
            "soft_scale": scales[p["name"]], "exact_scale": p["exact_scale"],
            "soft_cpu_s": [round(v.cpu, 2) for v in sv],
            "soft_samples": [v.samples for v in sv],
            "soft_errors": [v.error for v in sv if v.error],
            "soft_stdout": sv[0].stdout if sv else "",
            **oracle_checks.get(p["name"], {}),
        })
    summary = summarise(rows, a.repeats)
    summary.update({
        "commit": commit, "date": datetime.date.today().isoformat(),
        "oracle_env": " ".join(f"{k}={v}" for k, v in sorted(oracle_env.items())),
        "cache_spec": cache_spec, "repeats": a.repeats, "oracle_repeats": a.oracle_repeats,
        "oracle_repeats_threaded": a.oracle_repeats_threaded,
        "time_total_s": round(t_total, 1), "time_exact_s": round(t_exact, 1),
        "exact_runs_done": exact_runs_done, "time_calibration_s": round(t_cal, 1),
        "time_soft_s": round(t_soft, 1), "exact_unstable": exact_unstable,
    })
    if a.markdown:
        print_markdown(rows, summary)
    else:
        print_text(rows, summary)
    if a.json:
        save_json(a.json, {"summary": summary, "programs": rows, "manifest_cache": cache_spec})
    return 0


def print_exact(progs, exact, unstable, seconds, markdown):
    header = ["program", "family", "exact runs", "oracle", "share", "stdout"]
    body = [[p["name"], p["family"], ", ".join(r.full for r in exact[p["name"]].all_runs),
             exact[p["name"]].full, f"{exact[p['name']].share or 0:.2f}",
             exact[p["name"]].stdout.split(" ", 1)[-1]] for p in progs]
    if markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(header, *body)]
        for line in [header] + body:
            print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    print(f"\nexact mode disagreed with itself on {len(unstable)} of {len(progs)} programs"
          + (": " + ", ".join(unstable) if unstable else "") + f"; {seconds:.0f} s")


def summarise(rows, repeats):
    s = {}
    total_runs = sum(len(r["soft"]) for r in rows)
    s["programs"] = len(rows)
    s["soft_runs"] = total_runs
    s["agreement"] = sum(r["agree"] for r in rows) / max(total_runs, 1)
    s["agreement_with_level"] = sum(r["agree_level"] for r in rows) / max(total_runs, 1)
    s["programs_majority_agree"] = sum(r["agree"] * 2 > len(r["soft"]) for r in rows)
    fam = {}
    for f in FAMILIES:
        rs = [r for r in rows if r["family"] == f]
        if rs:
            n = sum(len(r["soft"]) for r in rs)
            fam[f] = {"programs": len(rs), "runs": n, "agree": sum(r["agree"] for r in rs),
                      "agreement": sum(r["agree"] for r in rs) / max(n, 1)}
    s["per_family"] = fam
    ctl = [r for r in rows if r["family"] == "control"]
    ctl_runs = sum(len(r["soft"]) for r in ctl)
    s["control_soft_none_rate"] = (sum(k == NONE for r in ctl for k in r["soft"]) / ctl_runs
                                   if ctl_runs else None)
    s["control_exact_none"] = f"{sum(r['exact'] == NONE for r in ctl)}/{len(ctl)}"
    s["stability"] = sum(r["stable"] for r in rows) / max(len(rows), 1)
    s["soft_errors"] = sum(len(r["soft_errors"]) for r in rows)
    s["exact_errors"] = sum(r["exact"] == ERROR for r in rows)
    cpus = [c for r in rows for c in r["soft_cpu_s"]]
    s["soft_runs_under_1s_cpu"] = sum(c < 1.0 for c in cpus)
    s["soft_cpu_median_s"] = round(statistics.median(cpus), 2) if cpus else None
    matrix = collections.defaultdict(collections.Counter)
    for r in rows:
        for k in r["soft"]:
            matrix[r["exact"]][k] += 1
    s["confusion"] = {ex: dict(c) for ex, c in matrix.items()}
    # The same without the programs whose oracle was shown not to measure them (oracle_check).
    bad = [r for r in rows if r.get("unreliable")]
    s["oracle_unreliable"] = {r["name"]: r["unreliable"] for r in bad}
    if bad:
        ok = [r for r in rows if not r.get("unreliable")]
        n = sum(len(r["soft"]) for r in ok)
        s["checked_agreement"] = sum(r["agree"] for r in ok) / n if n else None
        s["checked_per_family"] = {}
        for f in FAMILIES:
            rs = [r for r in ok if r["family"] == f]
            if rs:
                s["checked_per_family"][f] = (sum(r["agree"] for r in rs)
                                              / max(sum(len(r["soft"]) for r in rs), 1))
    return s


def key_order(keys):
    def rank(k):
        return (k == ERROR, k == NONE, k)
    return sorted(keys, key=rank)


def confusion_table(summary):
    m = summary["confusion"]
    rows = key_order(m.keys())
    cols = key_order({c for r in m.values() for c in r})
    header = ["exact \\ soft"] + [abbr(c) for c in cols] + ["runs", "agree"]
    body = []
    for ex in rows:
        n = sum(m[ex].values())
        agree = m[ex].get(ex, 0) if ex != ERROR else 0
        body.append([abbr(ex)] + [str(m[ex].get(c, "")) or "." for c in cols]
                    + [str(n), f"{agree / n:.0%}" if n else "-"])
    return header, body


def soft_summary(keys):
    c = collections.Counter(keys)
    return ", ".join(f"{abbr(k)} x{n}" if len(c) > 1 or n > 1 else abbr(k)
                     for k, n in sorted(c.items(), key=lambda kv: -kv[1]))


def program_table(rows):
    header = ["program", "family", "exact (top finding)", "soft verdicts", "agree", "stable",
              "soft scale", "soft CPU s (median)"]
    body = []
    for r in rows:
        ex = r["exact_full"] if r["exact"] in (NONE, ERROR) else \
            f"{abbr(r['exact'])} {r['exact_full'].rsplit('/', 1)[1]}"
        if len(set(r["exact_runs"])) > 1:
            ex += f" (unstable: {', '.join(abbr(k) for k in r['exact_runs'])})"
        if r.get("unreliable"):
            ex += " (oracle unreliable: see the oracle check line)"
        cpu = statistics.median(r["soft_cpu_s"]) if r["soft_cpu_s"] else 0
        body.append([r["name"], r["family"], ex, soft_summary(r["soft"]),
                     f"{r['agree']}/{len(r['soft'])}", "yes" if r["stable"] else "no",
                     str(r["soft_scale"]), f"{cpu:.1f}"])
    return header, body


def family_table(summary, md=False):
    header = ["family", "programs", "soft runs", "agreeing runs", "agreement"]
    fam = summary["per_family"]
    body = [[f, str(fam[f]["programs"]), str(fam[f]["runs"]), str(fam[f]["agree"]),
             f"{fam[f]['agreement']:.0%}"] for f in FAMILIES if f in fam]
    b = "**" if md else ""
    body.append([f"{b}all{b}", str(summary["programs"]), str(summary["soft_runs"]),
                 str(round(summary["agreement"] * summary["soft_runs"])),
                 f"{b}{summary['agreement']:.0%}{b}"])
    return header, body


def headline(s):
    ctl = s["control_soft_none_rate"]
    lines = [
        f"agreement (soft top kind/origin == exact's, over all soft runs): {s['agreement']:.1%}"
        f" ({s['programs_majority_agree']}/{s['programs']} programs agree in most runs;"
        f" with the level too: {s['agreement_with_level']:.1%})",
        "controls: soft reports no finding in "
        + (f"{ctl:.0%}" if ctl is not None else "-")
        + f" of runs (exact: none on {s['control_exact_none']} controls)",
        f"stability: {s['stability']:.0%} of programs get the same soft verdict in all "
        f"{s['repeats']} runs",
        f"errors: {s['soft_errors']} soft runs, {s['exact_errors']} exact oracles; "
        f"soft runs under 1 s of CPU: {s['soft_runs_under_1s_cpu']} "
        f"(median {s['soft_cpu_median_s']} s)",
        f"time: {s['time_total_s']:.0f} s in all (exact {s['time_exact_s']:.0f} s for "
        f"{s['exact_runs_done']} uncached runs, calibration {s['time_calibration_s']:.0f} s, "
        f"soft {s['time_soft_s']:.0f} s)",
        f"cache: {s['cache_spec']}; commit {s['commit']}, {s['date']}"
        + (f"; oracle env: {s['oracle_env']}" if s.get("oracle_env") else ""),
    ]
    if s.get("oracle_unreliable"):
        lines.append("oracle check: exact mode did not keep the program's lock hand-overs on "
                     + "; ".join(f"{n} ({why})" for n, why in s["oracle_unreliable"].items())
                     + "; without them: agreement "
                     + ("-" if s["checked_agreement"] is None else f"{s['checked_agreement']:.1%}")
                     + ", per family "
                     + ", ".join(f"{f} {v:.0%}" for f, v in s["checked_per_family"].items()))
    if s["exact_unstable"]:
        lines.append("exact mode disagreed with itself on: " + "; ".join(
            f"{n} ({', '.join(abbr(k) for k in ks)})" for n, ks in s["exact_unstable"].items()))
    return lines


def print_text(rows, summary):
    def table(header, body):
        widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
        for line in [header] + body:
            print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip())
        print()
    table(*program_table(rows))
    print("Confusion matrix (rows: exact mode's top finding; columns: soft mode's, one count "
          "per soft run):")
    table(*confusion_table(summary))
    table(*family_table(summary))
    for line in headline(summary):
        print(line)


def print_markdown(rows, summary):
    def table(header, body):
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" if all(
            x.replace("%", "").replace(".", "").replace("*", "").isdigit() or x == "."
            for x in [b[i] for b in body]) else "---" for i in range(len(header))) + "|")
        for b in body:
            print("| " + " | ".join(x.replace("|", "\\|") for x in b) + " |")
        print()
    for line in headline(summary):
        print(f"- {line}")
    print()
    table(*family_table(summary, md=True))
    print("Confusion matrix (rows: exact mode's top finding; columns: soft mode's; one count "
          "per soft run):\n")
    table(*confusion_table(summary))
    h, b = program_table(rows)
    b = [[f"`{x[0]}`"] + x[1:] for x in b]
    table(h, b)


if __name__ == "__main__":
    sys.exit(main())
