#!/usr/bin/env python3
"""Builds every program of a generated corpus twice:

  exact:  build/bin/whymiss-cc -std=c11 -O2 -pthread NAME.c -o OUT/exact/NAME   (every access simulated)
  native: gcc -std=c11 -O2 -pthread -g NAME.c -o OUT/native/NAME   (dynamically linked, for soft mode)

  build.py --src build/corpus/src --out build/corpus [--whymiss-cc build/bin/whymiss-cc] [-j N]
           [--only NAME ...] [--family F]

-g changes no code, it only gives soft mode's report source lines. A binary newer than its
source (and, for exact builds, than the wrapper and its runtime) is left alone. Exit 1 if any
build fails (its compiler output is printed).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CFLAGS = ["-std=c11", "-O2", "-pthread"]


def load_manifest(src_dir):
    with open(os.path.join(src_dir, "manifest.json")) as f:
        return json.load(f)


def select(programs, only=None, families=None):
    if only:
        names = {p["name"] for p in programs}
        unknown = set(only) - names
        if unknown:
            raise SystemExit(f"unknown program(s): {' '.join(sorted(unknown))}")
        programs = [p for p in programs if p["name"] in only]
    if families:
        programs = [p for p in programs if p["family"] in families]
    return programs


def _stale(out, deps):
    if not os.path.exists(out):
        return True
    t = os.path.getmtime(out)
    return any(os.path.exists(d) and os.path.getmtime(d) > t for d in deps)


def _compile(cmd, out, deps, env=None):
    if not _stale(out, deps):
        return None
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = subprocess.run(cmd + ["-o", out + ".tmp"], capture_output=True, text=True, env=env,
                       timeout=600)
    if r.returncode != 0:
        return f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    os.replace(out + ".tmp", out)
    return None


def build(src_dir, out_dir, programs, whymiss_cc, cc="gcc", jobs=None, quiet=False):
    """Builds exact and native binaries; returns {name: {"exact": path, "native": path}}.
    Raises RuntimeError listing the failures."""
    rt = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(whymiss_cc))), "lib",
                      "libwhymiss-rt.so")
    tasks = []
    paths = {}
    for p in programs:
        src = os.path.join(src_dir, p["source"])
        exact = os.path.join(out_dir, "exact", p["name"])
        native = os.path.join(out_dir, "native", p["name"])
        paths[p["name"]] = {"exact": exact, "native": native}
        tasks.append(([whymiss_cc] + CFLAGS + [src], exact, [src, whymiss_cc, rt]))
        tasks.append(([cc] + CFLAGS + ["-g", src], native, [src]))
    errors = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as ex:
        for err in ex.map(lambda t: _compile(*t), tasks):
            if err:
                errors.append(err)
    if errors:
        raise RuntimeError("\n".join(errors))
    if not quiet:
        print(f"build.py: {len(programs)} programs built (exact and native) in {out_dir}")
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(REPO, "build", "corpus", "src"),
                    help="generated corpus (gen.py's OUTDIR)")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "corpus"),
                    help="binaries go to OUT/exact and OUT/native")
    ap.add_argument("--whymiss-cc", default=os.path.join(REPO, "build", "bin", "whymiss-cc"))
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("-j", "--jobs", type=int)
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--family", action="append")
    a = ap.parse_args()
    progs = select(load_manifest(a.src)["programs"], a.only, a.family)
    try:
        build(a.src, a.out, progs, a.whymiss_cc, a.cc, a.jobs)
    except RuntimeError as e:
        print(f"build.py: build failed:\n{e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
