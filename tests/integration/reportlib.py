"""Shared by the output-format checks: record a program once and write its report in several
formats from the same profile."""
import os
import subprocess


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600, env=env)


def record_and_report(whymiss, prog, tmp, formats):
    """Records PROG into TMP/p.data and writes one report per format into TMP/report.FORMAT.
    Returns ({format: path}, None), or (None, a failure message)."""
    prof = os.path.join(tmp, "p.data")
    r = run(whymiss, "record", "-o", prof, "--", prog)
    if r.returncode != 0:
        return None, "record: " + r.stderr.strip()
    paths = {}
    for fmt in formats:
        paths[fmt] = os.path.join(tmp, "report." + fmt)
        r = run(whymiss, "report", "-i", prof, "--format", fmt, "--output", paths[fmt])
        if r.returncode != 0:
            return None, f"report --format {fmt}: " + r.stderr.strip()
    return paths, None
