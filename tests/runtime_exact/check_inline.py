#!/usr/bin/env python3
"""Misses in an inlined accessor are reported at its caller's line, with the inline chain.

  check_inline.py WHYMISS PROGRAM SOURCE

Runs `whymiss run` on PROGRAM (inline_helper.c built with whymiss-cc -O2) for a JSON and a text
report and checks both: the source line with the most L1 misses is the caller's (the line of
SOURCE marked CALLER_LINE), its frames go from the accessor (the line marked HELPER_LINE) out to
the caller, no source line is the accessor's own, and the top finding's instruction says the
same. Exit 0 when it holds, 1 with a reason otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile


def marked_line(source, marker):
    with open(source) as f:
        for n, text in enumerate(f, 1):
            if marker in text:
                return n
    raise SystemExit(f"FAIL: no line of {source} is marked {marker}")


def fail(msg):
    print("FAIL:", msg)
    return 1


def main():
    whymiss, program, source = sys.argv[1:4]
    caller = marked_line(source, "CALLER_LINE")
    helper = marked_line(source, "HELPER_LINE")
    name = os.path.basename(source)
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "r.json")
        r = subprocess.run([whymiss, "run", "--mode", "exact", "--format", "json", "--output", rep,
                            "--", program], capture_output=True, text=True, timeout=600, cwd=tmp)
        if r.returncode != 0:
            return fail(f"whymiss run exited {r.returncode}: {r.stderr.strip()}")
        with open(rep) as f:
            report = json.load(f)
        t = subprocess.run([whymiss, "run", "--mode", "exact", "--", program], capture_output=True,
                           text=True, timeout=600, cwd=tmp)
        if t.returncode != 0:
            return fail(f"whymiss run (text) exited {t.returncode}: {t.stderr.strip()}")
        text = t.stderr

    lines = report["source_lines"]
    if not lines:
        return fail("the report has no source lines")
    top = max(lines, key=lambda l: l["misses"]["L1"])
    if os.path.basename(top["file"]) != name or top["line"] != caller:
        return fail(f"the line with most L1 misses is {top['file']}:{top['line']}, "
                    f"expected the caller's {name}:{caller}")
    frames = top.get("frames", [])
    if len(frames) < 2 or frames[0]["function"] != "read64" or frames[0]["line"] != helper \
            or frames[-1]["line"] != caller or frames[-1]["function"] != top["function"]:
        return fail(f"expected frames from read64 at line {helper} out to line {caller}: {frames}")
    at_helper = [l for l in lines if os.path.basename(l["file"]) == name and l["line"] == helper]
    if at_helper:
        return fail(f"misses are still attributed to the accessor's own line: {at_helper}")
    findings = report["findings"]
    if not findings or not findings[0]["instructions"]:
        return fail(f"no finding with instructions: {findings}")
    ins = findings[0]["instructions"][0]
    if ins["line"] != caller or ins["frames"][0]["function"] != "read64":
        return fail(f"the top finding's instruction is not at the caller's line with read64 inlined: {ins}")
    want = f"{name}:{caller} via read64 ({name}:{helper})"
    findings_text, _, lines_text = text.partition("\nSource lines by ")
    if not any(l.startswith("   code: ") and want in l for l in findings_text.splitlines()):
        return fail(f"no finding's code line of the text report shows '{want}':\n{text}")
    if want not in lines_text:
        return fail(f"the text report's source lines do not show '{want}':\n{text}")
    print(f"ok: {name}:{caller} via read64 ({name}:{helper})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
