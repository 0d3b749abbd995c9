#!/usr/bin/env python3
"""End-to-end check of one workload: runs `whymiss run --mode MODE` (default exact) and asserts
the diagnosis. Exit 0 when the verdict holds, 1 with a reason otherwise.

  check_run.py WHYMISS PROGRAM --expect KIND ORIGIN   # the top finding is KIND/ORIGIN
  check_run.py WHYMISS PROGRAM --absent KIND ORIGIN   # no finding of KIND/ORIGIN
  check_run.py WHYMISS PROGRAM --none                 # no finding at all
  check_run.py WHYMISS PROGRAM --profile-only [--signal N] [--same-output NATIVE]
Options: --expect-pattern P and --expect-suggestion TEXT (with --expect) check the top finding's
access pattern and fix; --mode exact|soft|auto (auto: --expect-mode says which mode the report must name),
--args ARG... passed to the program (and to the --same-output program). Every report must follow
docs/report.schema.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_schema  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("whymiss")
    ap.add_argument("program")
    ap.add_argument("--expect", nargs=2)
    ap.add_argument("--absent", nargs=2)
    ap.add_argument("--none", action="store_true")
    ap.add_argument("--profile-only", action="store_true")
    ap.add_argument("--signal", type=int, default=0)
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--same-output", help="a native build whose stdout must match")
    ap.add_argument("--extra", nargs="*", default=[])
    ap.add_argument("--mode", default="exact")
    ap.add_argument("--expect-mode")
    ap.add_argument("--args", nargs="*", default=[])
    ap.add_argument("--expect-note", help="text that one of the report's notes must contain")
    ap.add_argument("--no-note", help="text that none of the report's notes may contain")
    ap.add_argument("--expect-pattern", help="with --expect: the top finding's access pattern")
    ap.add_argument("--expect-suggestion", help="with --expect: text its suggestion must contain")
    ap.add_argument("--complete", action="store_true",
                    help="exact mode: no access may be dropped (every one simulated)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run this many times, each asserted (for checks that timing can upset)")
    a = ap.parse_args()

    for attempt in range(a.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            prof = os.path.join(tmp, "p.data")
            rep = os.path.join(tmp, "r.json")
            cmd = [a.whymiss, "run", "--mode", a.mode, "-o", prof, "--format", "json",
                   "--output", rep] + a.extra + ["--", a.program] + a.args
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            # whymiss exits as the program did: its exit code, or 128 + the killing signal.
            want_status = 128 + a.signal if a.signal else a.exit_code
            if r.returncode != want_status:
                return fail(f"whymiss exited {r.returncode}, expected {want_status}: {r.stderr.strip()}")
            if not os.path.exists(rep):
                return fail("no report was written")
            with open(rep) as f:
                report = json.load(f)
            errors = report_schema.validate(report, "report")
            if errors:
                return fail("the report does not follow docs/report.schema.json: " + "; ".join(errors[:5]))
            want_mode = a.expect_mode or (a.mode if a.mode != "auto" else None)
            if want_mode and report.get("mode") != want_mode:
                return fail(f"mode is {report.get('mode')!r}, expected {want_mode!r}")
            if a.expect_note:
                notes = report.get("notes", []) + report.get("collector_notes", [])
                if not any(a.expect_note in str(n) for n in notes):
                    return fail(f"no note mentions {a.expect_note!r}: {notes}")
            if a.no_note:
                notes = report.get("notes", []) + report.get("collector_notes", [])
                if any(a.no_note in str(n) for n in notes):
                    return fail(f"a note mentions {a.no_note!r}: {notes}")
            exit_info = report.get("exit", {})
            if a.signal and exit_info.get("signal") != a.signal:
                return fail(f"expected the program to end by signal {a.signal}, report says {exit_info}")
            if not a.signal and exit_info.get("code") != a.exit_code:
                return fail(f"expected exit code {a.exit_code}, report says {exit_info}")
            if report["totals"]["accesses"] <= 0 and report.get("mode") == "exact":
                return fail("the profile recorded no accesses")
            if a.complete and report["totals"].get("dropped_accesses") != 0:
                return fail(f"run {attempt + 1} of {a.repeat} dropped "
                            f"{report['totals'].get('dropped_accesses')} accesses")
            if a.same_output:
                native = subprocess.run([a.same_output] + a.args, capture_output=True, text=True,
                                        timeout=600)
                if native.stdout != r.stdout:
                    return fail(f"output changed under profiling: {r.stdout!r} vs {native.stdout!r}")
            findings = report["findings"]
            verdicts = [(f["kind"], f["origin"]) for f in findings]
            if a.expect:
                if not findings:
                    return fail(f"expected {a.expect}, got no finding; notes: {report.get('notes')}")
                if tuple(a.expect) != verdicts[0]:
                    return fail(f"expected top finding {tuple(a.expect)}, got {verdicts}")
                top = findings[0]
                if not top["instructions"] or not top["objects"]:
                    return fail(f"the top finding names no instruction or object: {top}")
                if not any(i.get("line", 0) > 0 for i in top["instructions"]):
                    return fail(f"no instruction of the top finding has a source line: {top['instructions']}")
                if a.expect_pattern and top.get("pattern") != a.expect_pattern:
                    return fail(f"expected pattern {a.expect_pattern!r}, got {top.get('pattern')!r}: "
                                f"{top.get('evidence')}")
                if a.expect_suggestion and a.expect_suggestion not in top.get("suggestion", ""):
                    return fail(f"the suggestion does not mention {a.expect_suggestion!r}: "
                                f"{top.get('suggestion')!r}")
            if a.absent and tuple(a.absent) in verdicts:
                return fail(f"expected no {tuple(a.absent)} finding, got {verdicts}")
            if a.none and findings:
                return fail(f"expected no finding, got {verdicts}")
    print("ok:", " ".join(os.path.basename(x) for x in [a.program]), verdicts if not a.profile_only else "")
    return 0


def fail(msg):
    print("FAIL:", msg)
    return 1


if __name__ == "__main__":
    sys.exit(main())
