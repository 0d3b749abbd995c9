#!/usr/bin/env python3
"""progress_check.py WHYMISS PROGRAM: exact mode's progress line (issue #20 item 7).

PROGRAM is progress/until_eof.c built with whymiss-cc: it works until its stdin closes, or for
ROUNDS rounds when given them.
1. stderr a terminal (a pseudo-terminal): `whymiss record` shows "N accesses simulated, M:SS
   elapsed" lines there; the test closes the program's stdin once it has seen two, so the run
   lasts as long as that takes, however loaded the machine. The lines are at least 2 s apart,
   the counts grow, the line is cleared at the end, and the program's stdout is byte for byte
   what it prints when run alone.
2. stderr a pipe, for as many rounds as run 1 took: no progress line, no carriage return.
3. A terminal with --no-progress, as long: no progress line.
4. `whymiss run` on a terminal: any progress line is cleared before the report begins.
Exit 0 when all hold, 1 with a reason otherwise."""
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time

LINE = re.compile(rb"\rwhymiss: ([0-9,]+) accesses simulated, (?:(\d+):)?(\d+):(\d\d) elapsed\x1b\[K")
CLEAR = b"\r\x1b[K"
DEADLINE_S = 180  # per run; a run that shows no line ends only here


def fail(msg):
    print("FAIL:", msg)
    return 1


def on_terminal(cmd, want_lines=None):
    """Runs cmd with stderr on a pseudo-terminal, stdin and stdout on pipes. With want_lines,
    closes stdin once that many progress lines have appeared (else at once). Returns (status,
    stdout, terminal bytes)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    if not want_lines:
        p.stdin.close()
    term = b""
    out = b""
    end = time.monotonic() + DEADLINE_S
    fds = [master, p.stdout.fileno()]
    while fds and time.monotonic() < end:
        ready, _, _ = select.select(fds, [], [], end - time.monotonic())
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                chunk = b""
            if not chunk:
                fds.remove(fd)
            elif fd == master:
                term += chunk
            else:
                out += chunk
        if want_lines and not p.stdin.closed and len(LINE.findall(term)) >= want_lines:
            p.stdin.close()
    os.close(master)
    p.stdout.close()
    if fds:
        p.kill()
        p.wait()
        raise RuntimeError(f"{cmd} did not end within {DEADLINE_S} s; terminal so far: {term[-500:]!r}")
    return p.wait(), out, term


def seconds(m):
    h, mnt, s = m[1] or b"0", m[2], m[3]
    return int(h) * 3600 + int(mnt) * 60 + int(s)


def main():
    whymiss, prog = sys.argv[1:3]
    alone = subprocess.run([prog], stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    if alone.returncode != 0 or not alone.stdout.endswith(b"done\n"):
        return fail(f"{prog} alone exited {alone.returncode}: {alone.stderr!r}")
    with tempfile.TemporaryDirectory() as tmp:
        prof = os.path.join(tmp, "p.data")
        # 1. On a terminal.
        status, out, term = on_terminal([whymiss, "record", "-o", prof, "--", prog], want_lines=2)
        if status != 0:
            return fail(f"record exited {status}: {term[-500:]!r}")
        lines = LINE.findall(term)
        if len(lines) < 2:
            return fail(f"{len(lines)} progress lines on the terminal: {term[-500:]!r}")
        counts = [int(m[0].replace(b",", b"")) for m in lines]
        times = [seconds(m) for m in lines]
        if counts != sorted(counts) or counts[-1] == 0:
            return fail(f"access counts do not grow: {counts}")
        if times[0] < 2 or any(b - a < 2 for a, b in zip(times, times[1:])):
            return fail(f"progress lines closer than 2 s apart: elapsed {times}")
        last = term.rfind(b"accesses simulated")
        if term.find(CLEAR, last) < 0:
            return fail(f"the last progress line is not cleared: {term[last - 80:]!r}")
        if out != alone.stdout:
            return fail("the program's stdout differs from its output when run alone")
        m = re.search(rb"rounds=(\d+)", term)
        if not m:
            return fail(f"the program's stderr did not reach the terminal: {term[-300:]!r}")
        rounds = m.group(1).decode()

        # 2. stderr a pipe, as long a run.
        r = subprocess.run([whymiss, "record", "-o", prof, "--", prog, rounds], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=DEADLINE_S)
        if r.returncode != 0:
            return fail(f"record (pipe) exited {r.returncode}: {r.stderr[-300:]!r}")
        if b"accesses simulated" in r.stderr or b"\r" in r.stderr:
            return fail(f"progress written to a stderr that is not a terminal: {r.stderr[:300]!r}")
        if r.stdout != alone.stdout:
            return fail("the program's stdout differs (stderr a pipe)")

        # 3. --no-progress on a terminal.
        status, out, term3 = on_terminal([whymiss, "record", "--no-progress", "-o", prof, "--", prog, rounds])
        if status != 0 or b"accesses simulated" in term3 or out != alone.stdout:
            return fail(f"--no-progress: status {status}, terminal {term3[-300:]!r}")

        # 4. `run`: the report comes after the line is cleared.
        status, out, term4 = on_terminal([whymiss, "run", "--", prog, rounds])
        report = term4.find(b"whymiss report:")
        if status != 0 or report < 0 or out != alone.stdout:
            return fail(f"run: status {status}, terminal {term4[-300:]!r}")
        shown = term4.rfind(b"accesses simulated")
        if shown >= 0 and not (shown < term4.find(CLEAR, shown) < report):
            return fail(f"run: the report begins before the progress line is cleared: {term4[:report + 40]!r}")
    print(f"ok: {len(lines)} progress lines at {times} s ({counts[-1]:,} accesses); "
          f"none on a pipe or with --no-progress; cleared before run's report")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        sys.exit(fail(e))
