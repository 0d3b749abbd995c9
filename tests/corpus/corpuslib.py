"""What bench/soft_vs_exact.py and the ctest hook (check_corpus.py) share: one run of
`whymiss run` on a corpus program, reduced to its verdict, with a timeout that also ends the
profiled program; and the calibration of a soft-mode scale from native runs."""
import json
import os
import resource
import signal
import subprocess
import tempfile
import time

NONE = "none"
ERROR = "error"


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_group(cmd, timeout, cwd=None, env=None):
    """Runs cmd in a session of its own (in `env`, default ours); on timeout kills that process
    group (the profiled program too, not just whymiss). Returns (returncode or None on timeout,
    stdout, stderr, wall seconds, CPU seconds of the process and its waited-for children)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=cwd, env=env, start_new_session=True, errors="replace")
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        rc = None
    return rc, out, err, time.perf_counter() - t0, _children_cpu() - cpu0


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


class Verdict:
    """A run's outcome: key is 'kind/origin' of the top finding, 'none', or 'error'."""

    def __init__(self, kind=None, origin=None, level=None, share=None, error=None, findings=(),
                 wall=0.0, cpu=0.0, stdout="", mode=None, samples=None):
        self.kind, self.origin, self.level, self.share = kind, origin, level, share
        self.error = error
        self.findings = list(findings)
        self.wall, self.cpu, self.stdout, self.mode, self.samples = wall, cpu, stdout, mode, samples

    @property
    def key(self):
        if self.error is not None:
            return ERROR
        if self.kind is None:
            return NONE
        return f"{self.kind}/{self.origin}"

    @property
    def full(self):
        """key plus the level, e.g. 'conflict/application/L1'."""
        return f"{self.key}/{self.level}" if self.kind else self.key

    def to_json(self):
        return {"key": self.key, "kind": self.kind, "origin": self.origin, "level": self.level,
                "share": self.share, "error": self.error, "findings": self.findings,
                "wall_s": round(self.wall, 3), "cpu_s": round(self.cpu, 3),
                "stdout": self.stdout, "samples": self.samples}

    @classmethod
    def from_json(cls, d):
        return cls(d.get("kind"), d.get("origin"), d.get("level"), d.get("share"), d.get("error"),
                   d.get("findings", ()), d.get("wall_s", 0.0), d.get("cpu_s", 0.0),
                   d.get("stdout", ""), samples=d.get("samples"))


def run_whymiss(whymiss, mode, binary, scale, cache_spec=None, timeout=300, extra=(), env=None):
    """`whymiss run --mode MODE` on binary with argv[1] = scale; never raises for a failing run.
    It runs in a scratch directory, so relative paths are made absolute first. `env`: variables
    set on top of ours (e.g. WHYMISS_RELAY_NICE)."""
    whymiss, binary = (os.path.abspath(x) if os.sep in x else x for x in (whymiss, binary))
    with tempfile.TemporaryDirectory(prefix="whymiss-corpus-") as tmp:
        prof, rep = os.path.join(tmp, "p.data"), os.path.join(tmp, "r.json")
        cmd = [whymiss, "run", "--mode", mode, "-o", prof, "--format", "json", "--output", rep]
        if cache_spec:
            cmd += ["--cache", cache_spec]
        cmd += list(extra) + ["--", binary, str(scale)]
        try:
            rc, out, err, wall, cpu = run_group(cmd, timeout, cwd=tmp,
                                                env=dict(os.environ, **env) if env else None)
        except OSError as e:
            return Verdict(error=f"cannot run {cmd[0]}: {e}")
        if rc is None:
            return Verdict(error=f"timed out after {timeout} s", wall=wall, cpu=cpu,
                           stdout=first_line(out))
        if rc != 0:
            return Verdict(error=f"exit {rc}: {first_line(err) or '(no stderr)'}", wall=wall,
                           cpu=cpu, stdout=first_line(out))
        try:
            with open(rep) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            return Verdict(error=f"no report ({e}); stderr: {first_line(err)}", wall=wall, cpu=cpu,
                           stdout=first_line(out))
    code = report.get("exit", {}).get("code")
    if code not in (0, None) or report.get("exit", {}).get("signal"):
        return Verdict(error=f"program exit {report.get('exit')}: "
                             f"{first_line(err) or '(no stderr)'}",
                       wall=wall, cpu=cpu, stdout=first_line(out))
    findings = [{"kind": f["kind"], "origin": f["origin"], "level": f.get("level"),
                 "share": f.get("share"), "misses": f.get("misses")}
                for f in report.get("findings", [])]
    samples = None
    if report.get("totals", {}).get("unit") == "samples":
        samples = report["totals"].get("accesses")
    v = Verdict(findings=findings, wall=wall, cpu=cpu, stdout=first_line(out),
                mode=report.get("mode"), samples=samples)
    if findings:
        top = findings[0]
        v.kind, v.origin, v.level, v.share = top["kind"], top["origin"], top["level"], top["share"]
    return v


def calibrate(binary, start_scale, target_cpu, timeout=120):
    """A scale at which the native binary uses about target_cpu seconds of CPU: runs it at
    growing scales until a run takes >= 0.25 s, then extrapolates from the last two runs (their
    difference separates a fixed set-up cost from the work per unit). Returns (scale, details)
    or raises RuntimeError."""
    points = []
    scale = max(1, start_scale)
    while True:
        rc, _, err, _, cpu = run_group([binary, str(scale)], timeout)
        if rc != 0:
            raise RuntimeError(f"{os.path.basename(binary)} {scale}: exit {rc}: {first_line(err)}")
        points.append((scale, cpu))
        if cpu >= 0.25 or scale >= 1 << 30:
            break
        scale *= max(2, min(16, int(0.3 / max(cpu, 0.005)) + 1))
    (s2, c2) = points[-1]
    per_unit, fixed = c2 / s2, 0.0
    if len(points) >= 2:
        (s1, c1) = points[-2]
        slope = (c2 - c1) / (s2 - s1)
        if slope > 0 and c2 - slope * s2 >= 0:
            per_unit, fixed = slope, c2 - slope * s2
    want = max(1, int(round((target_cpu - fixed) / max(per_unit, 1e-9))))
    return want, {"points": points, "per_unit_s": per_unit, "fixed_s": fixed}
