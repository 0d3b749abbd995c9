"""What the speed benchmarks share: the cachegrind command they time exact mode against, and one
timed run, and the machine facts their tables print. (exact_overhead.py, real_programs.py,
thread_scaling.py)"""
import os
import platform
import subprocess
import sys
import time

# Cachegrind with this machine's L1D and L3 as D1 and LL; no output file (only its time counts).
CACHEGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--D1=49152,12,64",
              "--LL=33554432,16,64", "--cachegrind-out-file=/dev/null"]


def timed(cmd, timeout=600, env=None):
    """Wall seconds of one run of cmd (output discarded; `env`: the environment, default ours);
    exits 2 with its stderr if it fails."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        # (the environment's differences from ours: added or changed, and removed as `-u NAME`)
        extra = " ".join([f"{k}={v}" for k, v in sorted((env or {}).items()) if os.environ.get(k) != v] +
                         [f"-u {k}" for k in sorted(os.environ) if env is not None and k not in env])
        sys.stderr.write(f"failed ({r.returncode}): {extra + ' ' if extra else ''}{' '.join(cmd)}\n"
                         f"{r.stderr[-2000:]}\n")
        sys.exit(2)
    return dt


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
