#!/usr/bin/env python3
"""The program's heap is the native heap: heap_layout.c prints where its blocks land, natively
and under `whymiss run --mode MODE`, and every line must be the same (issue 18, item 3).

  heap_layout.py WHYMISS WHYMISS_CC SOURCE MODE

MODE exact compares the source built with plain `cc -O2` and run natively with the same source
built with whymiss-cc and run under exact mode; soft (or auto) runs the plain build both ways.
Runs with ASLR off (`setarch -R`) where the machine allows it, which also makes the brk heap's
absolute start comparable (same binary only); the offsets are compared either way.
"""
import os
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def main():
    whymiss, wrapper, source, mode = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        native = os.path.join(tmp, "native")
        r = run(["cc", "-O2", "-g", "-pthread", source, "-o", native])
        if r.returncode != 0:
            return fail(f"cc failed: {r.stderr}")
        profiled = native
        if mode == "exact":
            profiled = os.path.join(tmp, "exact")
            r = run([wrapper, "-O2", "-pthread", source, "-o", profiled])
            if r.returncode != 0:
                return fail(f"whymiss-cc failed: {r.stderr}")
        norand = ["setarch", "-R"] if run(["setarch", "-R", "true"]).returncode == 0 else []
        if not norand:
            print("note: cannot turn ASLR off here (setarch -R); comparing offsets only")
        nat = run(norand + [native])
        if nat.returncode != 0:
            return fail(f"native run exited {nat.returncode}: {nat.stderr}")
        prof = os.path.join(tmp, "p.data")
        got = run(norand + [whymiss, "run", "--mode", mode, "-o", prof, "--output",
                            os.path.join(tmp, "r.txt"), "--", profiled])
        if got.returncode != 0:
            return fail(f"whymiss exited {got.returncode}: {got.stderr.strip()}")
        want_lines, got_lines = nat.stdout.splitlines(), got.stdout.splitlines()
        if len(want_lines) != len(got_lines) or not want_lines:
            return fail(f"output differs in length:\n{nat.stdout}---\n{got.stdout}")
        bad = [f"  native {w!r}\n  {mode:6} {g!r}" for w, g in zip(want_lines[:-1], got_lines[:-1])
               if w != g]
        if bad:
            return fail(f"{len(bad)} blocks moved under {mode} mode:\n" + "\n".join(bad) +
                        f"\nnative:   {want_lines[-1]}\nprofiled: {got_lines[-1]}")
        if norand and profiled == native:
            want_brk, got_brk = want_lines[-1].split()[1], got_lines[-1].split()[1]
            if want_brk != got_brk:
                return fail(f"the brk heap starts elsewhere: {want_brk} natively, {got_brk}")
    print(f"ok: {len(want_lines) - 1} blocks at their native places under {mode} mode")
    return 0


def fail(msg):
    print("FAIL:", msg)
    return 1


if __name__ == "__main__":
    sys.exit(main())
