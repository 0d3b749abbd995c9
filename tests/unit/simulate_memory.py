#!/usr/bin/env python3
"""`whymiss simulate` in bounded memory (issue #19, items 11 and 12), under an address-space limit.

usage: simulate_memory.py WHYMISS

1. A trace piped on standard input that is larger than the process' RLIMIT_AS is simulated in
   one streaming pass, with the same counts as the same trace read from a file. (Buffered, its
   27-34 bytes per access ran out of address space: an uncaught bad_alloc.)
2. Private levels too big for the memory left: a core per thread is refused with one sentence
   and exit status 2 once the next core would not fit, never a bad_alloc abort; and a geometry
   whose first core cannot fit is refused before anything is read.
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

WHYMISS = sys.argv[1]
LIMIT = 256 << 20  # address space of the simulate process
SPEC = "L1=32K:8:64,L2=256K:8:64,L3=1M:16:64"


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def counts(report):
    j = json.loads(report)
    return j["totals"], j["cache"], j["threads"], j["cores"]


def main():
    # A block of 4096 accesses by 4 threads over a 2 MiB footprint (misses at every level),
    # repeated: 12 Mi accesses, ~280 MB of text. Buffered at 24+ bytes an access it would need
    # more than the 256 MiB the process may map.
    lines = []
    for i in range(4096):
        t = i % 4
        addr = 0x7f0000000000 + ((i * 2654435761) % (2 << 20) & ~7)
        lines.append("%d %s 0x%x %d\n" % (t, "W" if i % 5 == 0 else "R", addr, 8))
    block = "".join(lines).encode()
    repeats = 3400
    total = len(block) * repeats
    if total <= LIMIT:
        fail("the trace (%d bytes) is not larger than the limit" % total)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.trace")
        with open(path, "wb") as f:
            for _ in range(repeats):
                f.write(block)
        from_file = subprocess.run([WHYMISS, "simulate", path, "--cache", SPEC, "--format", "json"],
                                   capture_output=True, text=True)
        if from_file.returncode != 0:
            fail("simulate FILE: status %d: %s" % (from_file.returncode, from_file.stderr))
        p = subprocess.Popen([WHYMISS, "simulate", "-", "--cache", SPEC, "--format", "json"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=limited)
        with open(path, "rb") as f:
            try:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    p.stdin.write(chunk)
            except BrokenPipeError:
                pass
        p.stdin.close()
        out = p.stdout.read().decode()
        err = p.stderr.read().decode()
        rc = p.wait()
        if rc != 0:
            fail("simulate - under a %d MiB address-space limit: status %d: %s"
                 % (LIMIT >> 20, rc, err.strip()))
        if counts(out) != counts(from_file.stdout):
            fail("standard input and file disagree:\n%s\n%s" % (counts(out), counts(from_file.stdout)))
        accesses = counts(out)[0]["accesses"]
        if accesses != 4096 * repeats:
            fail("simulated %d accesses, not %d" % (accesses, 4096 * repeats))
        print("ok: %d MB through a pipe under a %d MiB limit, same counts as the file"
              % (total // 1000000, LIMIT >> 20))

    # 8 threads, each on a core of its own with a 32 MiB private L1 (~30 MiB of tags and shadow
    # a core): a few fit under the limit, the rest is refused with a sentence.
    trace = "".join("%d R %x 8\n" % (t, 0x1000 * t) for t in range(8)).encode()
    r = subprocess.run([WHYMISS, "simulate", "-", "--cache", "L1=32M:16:64"], input=trace,
                       capture_output=True, preexec_fn=limited)
    err = r.stderr.decode()
    if r.returncode != 2 or not err.startswith("whymiss: a simulated core of L1=32M:16:64 takes ") \
            or "of memory available; use smaller private levels or fewer cores (--cores)" not in err \
            or err.count("\n") != 1:
        fail("8 cores of 32 MiB under %d MiB: status %d, stderr %r" % (LIMIT >> 20, r.returncode, err))
    print("ok: " + err.strip())
    # Folded onto one core (--cores 1) the same trace fits.
    r = subprocess.run([WHYMISS, "simulate", "-", "--cache", "L1=32M:16:64", "--cores", "1"],
                       input=trace, capture_output=True, preexec_fn=limited)
    if r.returncode != 0:
        fail("--cores 1: status %d: %s" % (r.returncode, r.stderr.decode()))
    # A 1 GiB level (~1 GiB of tags and shadow) cannot fit even once.
    r = subprocess.run([WHYMISS, "simulate", "-", "--cache", "L1=1G:16:64"], input=trace,
                       capture_output=True, preexec_fn=limited)
    err = r.stderr.decode()
    if r.returncode != 2 or not err.startswith("whymiss: simulating L1=1G:16:64 takes "):
        fail("a 1 GiB L1 under %d MiB: status %d, stderr %r" % (LIMIT >> 20, r.returncode, err))
    print("ok: " + err.strip())


main()
