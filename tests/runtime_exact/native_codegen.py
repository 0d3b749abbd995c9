#!/usr/bin/env python3
"""whymiss-cc keeps GCC's native code for memcpy/memset idioms (issue 18, item 4).

  native_codegen.py WHYMISS_CC SOURCE

Compiles SOURCE (native_codegen.c) with plain `cc -O2` and with whymiss-cc -O2 (GCC) and lists
the functions each function calls (relocations of call targets, __tsan_* left out). Expected:
  zeroed, zeroed_4m, load64, store32, copy_n, zeroed_by_loop: the same calls as natively (calloc;
  calloc; none; none; memcpy; calloc: the loop needs the GCC plugin, gcc_tsan_late.cc);
  copy64, clear1k: memcpy / memset calls under whymiss-cc (reported to exact mode), whatever GCC
  does natively (it expands them inline).
Exits 0 when all hold, 1 with the differences otherwise.
"""
import os
import re
import subprocess
import sys
import tempfile

SAME = ["zeroed", "zeroed_4m", "load64", "store32", "copy_n", "zeroed_by_loop"]
CALLED = {"copy64": "memcpy", "clear1k": "memset"}


def calls(obj):
    out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", obj], capture_output=True,
                         text=True, check=True).stdout
    per_fn, fn = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            fn = m.group(1)
            per_fn[fn] = set()
            continue
        m = re.search(r"R_X86_64_(?:PLT32|PC32|GOTPCRELX|REX_GOTPCRELX)\s+([A-Za-z_][\w.]*)", line)
        if m and fn and not m.group(1).startswith("__tsan_") and m.group(1) != fn:
            per_fn[fn].add(m.group(1))
    return per_fn


def main():
    wrapper, source = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        plain, wm = os.path.join(tmp, "plain.o"), os.path.join(tmp, "whymiss.o")
        subprocess.run(["cc", "-O2", "-c", source, "-o", plain], check=True)
        env = dict(os.environ, WHYMISS_CC="gcc")
        subprocess.run([wrapper, "-O2", "-c", source, "-o", wm], check=True, env=env)
        native, got = calls(plain), calls(wm)
    bad = []
    for fn in SAME:
        if native.get(fn) != got.get(fn):
            bad.append(f"{fn}: calls {sorted(got.get(fn, []))} under whymiss-cc, "
                       f"{sorted(native.get(fn, []))} natively")
    for fn, callee in CALLED.items():
        if callee not in got.get(fn, set()):
            bad.append(f"{fn}: no {callee} call under whymiss-cc (an inline copy is not reported)")
    if bad:
        print("FAIL:\n  " + "\n  ".join(bad))
        return 1
    print("ok: " + ", ".join(f"{fn} {sorted(native[fn]) or 'no call'}" for fn in SAME))
    return 0


if __name__ == "__main__":
    sys.exit(main())
