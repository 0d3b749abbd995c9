#!/usr/bin/env python3
"""Exact mode says first how much of the program's CPU time ran in code it could not see.

  check_unseen.py WHYMISS UNSEEN_PROGRAM CONTROL_PROGRAM

UNSEEN_PROGRAM (unseen_main.c, built with whymiss-cc) spends over 90 % of its CPU time in
libunseen_lib.so, built with plain gcc: the text report's first lines must warn that a share of
at least 50 % ran in uninstrumented code and name that library, and the JSON report must say the
same (cpu_time.warning, the library first in cpu_time.uninstrumented_modules). CONTROL_PROGRAM
(unseen_control.c, all of it instrumented) must get no such warning, with enough samples to tell.
Verdicts only: the thresholds leave room for the sampling error. Exit 0 when all holds, 1 with a
reason otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

WARNING = "did not instrument"


def fail(msg):
    print("FAIL:", msg)
    return 1


def run(whymiss, program, tmp):
    """(text report, JSON report) of one recorded run of PROGRAM."""
    prof = os.path.join(tmp, os.path.basename(program) + ".data")
    r = subprocess.run([whymiss, "run", "--mode", "exact", "-o", prof, "--", program],
                       capture_output=True, text=True, timeout=600, cwd=tmp)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: whymiss run {program} exited {r.returncode}: {r.stderr.strip()}")
    j = subprocess.run([whymiss, "report", "-i", prof, "--format", "json"], capture_output=True,
                       text=True, timeout=600, cwd=tmp)
    if j.returncode != 0:
        raise SystemExit(f"FAIL: whymiss report exited {j.returncode}: {j.stderr.strip()}")
    return r.stderr, json.loads(j.stdout)


def main():
    whymiss, unseen, control = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        text, rep = run(whymiss, unseen, tmp)
        ctext, crep = run(whymiss, control, tmp)

    # The text report: the warning right after the title, naming the library and its share.
    report_lines = [l for l in text.splitlines() if not l.startswith("whymiss:")]
    first = report_lines[:2]
    warn = [l for l in first if WARNING in l]
    if not warn:
        return fail("the report's first lines do not warn of uninstrumented code:\n" + "\n".join(first))
    w = warn[0]
    share = int(w.split("warning: ", 1)[1].split("%", 1)[0].lstrip("<>"))
    if share < 50:
        return fail(f"the warning gives {share}% of the CPU time, expected at least 50%: {w}")
    if "libunseen_lib.so" not in w or "--mode soft" not in w or "sampled" not in w:
        return fail("the warning does not name libunseen_lib.so, soft mode and how it was measured: " + w)
    if text.find(WARNING) > text.find("level "):
        return fail("the warning does not come before the counts")

    cpu = rep.get("cpu_time")
    if not cpu or not cpu["warning"] or cpu["how"] != "sampled":
        return fail(f"the JSON report has no sampled cpu_time warning: {cpu}")
    mods = cpu["uninstrumented_modules"]
    if not mods or mods[0]["module"] != "libunseen_lib.so" or mods[0]["share"] < 0.5:
        return fail(f"the JSON report does not give libunseen_lib.so >= 50%: {mods}")
    if list(rep).index("cpu_time") > list(rep).index("totals"):
        return fail("cpu_time does not come before the totals in the JSON report")

    # The control: measured, and no warning.
    if WARNING in ctext:
        return fail("the control, all instrumented, got a warning:\n" + ctext)
    ccpu = crep.get("cpu_time")
    if not ccpu or ccpu["warning"] or not ccpu["enough_samples"]:
        return fail(f"the control's cpu_time should be measured, with enough samples, and no warning: {ccpu}")
    if "cpu time: " not in ctext:
        return fail("the control's text report has no cpu time line:\n" + ctext)
    print(w)
    print([l for l in ctext.splitlines() if l.startswith("cpu time: ")][0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
