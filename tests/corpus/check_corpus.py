#!/usr/bin/env python3
"""ctest check of one corpus program: exact mode's top finding (kind, origin) is the oracle; soft
mode on the native build must name the same (or, like exact, nothing). Exit 0 when they agree,
1 with both verdicts otherwise.

  check_corpus.py WHYMISS MANIFEST NAME EXACT_BIN NATIVE_BIN [--soft-seconds S] [--soft-scale N]

The exact scale and the cache geometry come from the manifest (gen.py). The soft scale is
calibrated from native runs to about --soft-seconds of CPU (default 1.5), unless --soft-scale
gives one ("manifest" takes the manifest's suggestion).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpuslib  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("whymiss")
    ap.add_argument("manifest")
    ap.add_argument("name")
    ap.add_argument("exact_bin")
    ap.add_argument("native_bin")
    ap.add_argument("--soft-seconds", type=float, default=1.5)
    ap.add_argument("--soft-scale")
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args()
    with open(a.manifest) as f:
        manifest = json.load(f)
    prog = next((p for p in manifest["programs"] if p["name"] == a.name), None)
    if prog is None:
        print(f"FAIL: {a.name} is not in {a.manifest}")
        return 1
    spec = manifest["cache_spec"]

    ex = corpuslib.run_whymiss(a.whymiss, "exact", a.exact_bin, prog["exact_scale"], spec,
                               a.timeout)
    if ex.error:
        print(f"FAIL: exact mode (scale {prog['exact_scale']}): {ex.error}")
        return 1
    if a.soft_scale == "manifest":
        scale = prog["soft_scale"]
    elif a.soft_scale:
        scale = int(a.soft_scale)
    else:
        try:
            scale, _ = corpuslib.calibrate(a.native_bin, prog["exact_scale"], a.soft_seconds)
        except (RuntimeError, OSError) as e:
            print(f"FAIL: calibrating the native build: {e}")
            return 1
    soft = corpuslib.run_whymiss(a.whymiss, "soft", a.native_bin, scale, spec, a.timeout)
    line = (f"{a.name}: exact (scale {prog['exact_scale']}) {ex.full}; soft (scale {scale}, "
            f"{soft.cpu:.1f} s CPU, {soft.samples} samples) {soft.full}")
    if soft.error:
        print(f"FAIL: {line}: {soft.error}")
        return 1
    if soft.key != ex.key:
        print(f"FAIL: {line}")
        return 1
    print(f"ok: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
