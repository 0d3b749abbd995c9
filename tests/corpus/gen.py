#!/usr/bin/env python3
"""Generates the differential corpus: small, self-contained C11 programs (pthreads), one cache
access pattern each, from parameterised families, sized from the machine's cache geometry.

  gen.py OUTDIR                                  # geometry from /sys/devices/system/cpu/cpu0/cache
  gen.py OUTDIR --cache L1=48K:12:64,L2=1M:16:64,L3=32M:16:64
  gen.py OUTDIR --family chase --only NAME ...   # a subset
  gen.py --list                                  # names and families, nothing written

Writes OUTDIR/NAME.c for every program and OUTDIR/manifest.json (name, family, parameters, the
intended pattern in words, suggested exact and soft scales, source hash). Every program takes
argv[1] = scale, the number of repetitions of its main loop (a "unit" of work); one unit is
sized so that exact mode at scale 1 takes about a second, and a program's pattern does not change
with the scale. Every program prints one line derived from its computation and exits 0.

The pattern each program is written to show is the generator's intent only: the oracle that
bench/soft_vs_exact.py compares soft mode against is exact mode's verdict, not this intent.
"""
import argparse
import hashlib
import json
import math
import os
import re
import sys
from string import Template

SYSFS_CACHE = "/sys/devices/system/cpu/cpu0/cache"
FAMILIES = ["chase", "stride", "reuse", "random", "perthread", "shared", "control"]

# Work per unit. Exact mode simulates ~10-50 M accesses/s single-threaded (bench/README.md), less
# when threads contend for lines; a unit is sized for ~0.3-1.5 s of it.
ST_ACCESSES = 6_000_000      # single-threaded accesses per unit
MT_ITERS = 2_000_000         # loop iterations per unit, summed over the threads
EXACT_SCALE_ST = 1
# Threads of a short loop may run one after the other under exact mode (a thread taking hits
# alone is fast, its partner needs a core; tests/integration/CMakeLists.txt): three units.
EXACT_SCALE_MT = 3
SOFT_CPU_SECONDS = 2.0       # soft mode wants >= ~1 s of CPU time for enough task-clock samples


# ---------------------------------------------------------------------------------------------
# Cache geometry


class Level:
    def __init__(self, name, size, ways, line):
        self.name, self.size, self.ways, self.line = name, size, ways, line

    @property
    def sets(self):
        return self.size // (self.ways * self.line)

    @property
    def way_bytes(self):  # addresses this far apart map to the same set
        return self.size // self.ways

    def spec(self):
        return f"{self.name}={fmt_bytes(self.size)}:{self.ways}:{self.line}"


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.I)
    if not m:
        raise ValueError(f"bad size {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def fmt_bytes(n):
    """Exact where it can be (a --cache spec needs it): 48K, 1M; else e.g. 337.5K."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g}{unit}"
    return str(n)


def parse_cache_spec(spec):
    levels = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*L(\d)=([^:]+):(\d+):(\d+)\s*", part)
        if not m:
            raise ValueError(f"bad cache level {part!r} (want e.g. L1=48K:12:64)")
        if int(m.group(1)) != len(levels) + 1:
            raise ValueError("cache levels must be L1, L2, ... in order")
        levels.append(Level(f"L{m.group(1)}", parse_size(m.group(2)), int(m.group(3)),
                            int(m.group(4))))
    return levels


def read_sysfs_cache(root=SYSFS_CACHE):
    """Data and unified caches of cpu0, by level."""
    by_level = {}
    for entry in sorted(os.listdir(root)):
        if not entry.startswith("index"):
            continue
        d = os.path.join(root, entry)

        def get(field):
            with open(os.path.join(d, field)) as f:
                return f.read().strip()
        try:
            if get("type") not in ("Data", "Unified"):
                continue
            lvl = int(get("level"))
            by_level[lvl] = Level(f"L{lvl}", parse_size(get("size")),
                                  int(get("ways_of_associativity")),
                                  int(get("coherency_line_size")))
        except (OSError, ValueError):
            continue
    levels = [by_level[k] for k in sorted(by_level)]
    if len(levels) < 2 or [int(lv.name[1:]) for lv in levels] != list(range(1, len(levels) + 1)):
        raise RuntimeError(f"could not read an L1 and L2 data cache from {root}; use --cache")
    return levels


# ---------------------------------------------------------------------------------------------
# Native cost model: only to suggest a soft-mode scale (~SOFT_CPU_SECONDS of CPU). Rough by
# design (within ~2x of what bench/soft_vs_exact.py's calibration measured on a Zen 5 KVM
# guest), and both the bench and the ctest check calibrate by running the native build instead.
# Nanoseconds per access (or iteration), by the level the footprint fits in: L1, L2, L3, memory.

NS_SEQ = [0.2, 0.25, 0.3, 0.4]     # streaming access (prefetched)
NS_WALK = [0.3, 0.5, 0.7, 1.0]     # strided and column walks
NS_RAND = [0.1, 0.2, 2.0, 8.5]     # independent random access, beyond the index's arithmetic
NS_DEP = [1.0, 3.5, 12.0, 90.0]    # dependent load (pointer chase)
NS_RNG = 1.5                       # computing one random index
NS_TREE = 2.0                      # a tree node's compare and branch, beyond 1/4 of NS_DEP
NS_HASH = 12.0                     # a hash lookup's key mixing and probe, beyond its access
NS_COUNTER = 0.3                   # one volatile increment of a counter (per thread; on our
                                   # VMs two threads seldom run at once, so sharing costs ~0)
NS_SHARED = {"atomic": 6.0, "mutex": 12.0, "racy": 0.3}  # one update of the shared counter
NS_COMPUTE = 1.0                   # one iteration of control_compute's LCG


class Geometry:
    def __init__(self, levels):
        self.levels = levels
        self.L1, self.L2 = levels[0], levels[1]
        self.L3 = levels[2] if len(levels) > 2 else None
        self.line = self.L1.line

    def fit_index(self, footprint):
        for i, lv in enumerate(self.levels[:3]):
            if footprint <= lv.size * 0.9:
                return i
        return 3

    def ns(self, table, footprint):
        return table[self.fit_index(footprint)]

    def spec(self):
        return ",".join(lv.spec() for lv in self.levels)


# ---------------------------------------------------------------------------------------------
# C sources

PRELUDE = r"""#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE $line

static long parse_scale(int argc, char **argv) {
  if (argc < 2) return 1;
  char *end = NULL;
  errno = 0;
  long s = strtol(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || s <= 0) {
    fprintf(stderr, "usage: %s [scale (positive integer)]\n", argv[0]);
    exit(2);
  }
  return s;
}

/* xorshift64*: the programs' only source of randomness, seeded with constants. */
static inline uint64_t rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n) by multiply-shift. */
static inline uint64_t rng_below(uint64_t *s, uint64_t n) {
  return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

/* A bijection of 64-bit integers (splitmix64's finaliser); mix(x) != 0 for x != 0. */
static inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

static inline void *xalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static inline void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) {
    fprintf(stderr, "out of memory (%zu x %zu bytes)\n", n, size);
    exit(1);
  }
  return p;
}
"""

# Threaded programs: NTHREADS workers start their loops together behind a barrier.
THREADS = r"""
static pthread_barrier_t start_line;
static long units;

static void run_threads(void *(*worker)(void *)) {
  pthread_t th[NTHREADS];
  if (pthread_barrier_init(&start_line, NULL, NTHREADS) != 0) {
    fprintf(stderr, "pthread_barrier_init failed\n");
    exit(1);
  }
  for (long t = 0; t < NTHREADS; t++) {
    if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  }
  for (long t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&start_line);
}
"""


class Program:
    def __init__(self, name, family, params, pattern, body, est_ns_unit, threads=1,
                 footprint=0):
        self.name, self.family, self.params, self.pattern = name, family, params, pattern
        self.body, self.est_ns_unit, self.threads, self.footprint = (body, est_ns_unit, threads,
                                                                     footprint)

    def source(self, geo):
        head = (f"/* {self.name} -- generated by tests/corpus/gen.py; do not edit.\n"
                f" * family: {self.family}; threads: {self.threads}\n"
                f" * pattern: {wrap_comment(self.pattern)}\n"
                f" * parameters: {wrap_comment(json.dumps(self.params, sort_keys=True))}\n"
                f" * cache geometry it was sized for: {geo.spec()}\n"
                f" * usage: {self.name} [scale]   (scale = repetitions of the main loop)\n"
                f" */\n")
        text = head + Template(PRELUDE).substitute(line=geo.line)
        if self.threads > 1:
            text += f"\n#define NTHREADS {self.threads}\n" + THREADS
        return text + "\n" + dedent_c(self.body)

    def entry(self, geo, src):
        exact = EXACT_SCALE_MT if self.threads > 1 else EXACT_SCALE_ST
        soft = max(exact, math.ceil(SOFT_CPU_SECONDS * 1e9 / max(self.est_ns_unit, 1.0)))
        return {
            "name": self.name,
            "family": self.family,
            "source": f"{self.name}.c",
            "sha256": hashlib.sha256(src.encode()).hexdigest(),
            "threads": self.threads,
            "params": self.params,
            "footprint_bytes": self.footprint,
            "pattern": self.pattern,
            "exact_scale": exact,
            "soft_scale": soft,
            "est_native_ms_per_unit": round(self.est_ns_unit / 1e6, 3),
        }


def wrap_comment(text, width=92):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return "\n *   ".join(lines).replace("*/", "* /")


def dedent_c(body):
    lines = body.strip("\n").split("\n")
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines) + "\n"


def c(template, **kw):
    """Dedents a C template, then fills in its ${...} fields; a multi-line value's later lines
    get the indentation of the line its field is on. Trailing blanks are dropped."""
    text = dedent_c(template)
    out = []
    for line in text.split("\n"):
        indent = line[:len(line) - len(line.lstrip())]
        fields = {k: str(v).rstrip("\n").replace("\n", "\n" + indent) for k, v in kw.items()}
        out.append(Template(line).substitute(**fields).rstrip())
    return "\n".join(out)


def label(mult, level):
    """0.5, 'L1' -> '0p5L1'."""
    s = f"{mult:g}".replace(".", "p")
    return f"{s}{level}"


# ---------------------------------------------------------------------------------------------
# (a) chase: dependent loads through shuffled lists and a binary search tree


def chase_list(geo, name, pool_bytes, node_bytes, placement, payload, pattern_extra=""):
    n = max(16, pool_bytes // node_bytes)
    steps = max(ST_ACCESSES // (2 if payload else 1), 2 * n)
    # Every node of 16 bytes or more carries a value: the walk sums it (payload) or not.
    has_val = node_bytes >= 16
    pad = node_bytes - (16 if has_val else 8)
    fields = "struct node *next;" + ("\nlong val;" if has_val else "")
    if pad > 0:
        fields += f"\nchar pad[{pad}];"
    if placement == "global":
        decl = "static struct node pool_storage[NNODES];"
        alloc = ("struct node *pool = pool_storage;\n"
                 "struct node **nodes = xalloc(NNODES * sizeof *nodes);\n"
                 "for (long i = 0; i < NNODES; i++) nodes[i] = &pool[i];")
    elif placement == "heap":
        decl = ""
        alloc = ("struct node *pool = xalloc(NNODES * sizeof(struct node));\n"
                 "struct node **nodes = xalloc(NNODES * sizeof *nodes);\n"
                 "for (long i = 0; i < NNODES; i++) nodes[i] = &pool[i];")
    else:  # one malloc per node, in address order; linked in shuffled order
        decl = ""
        alloc = ("struct node **nodes = xalloc(NNODES * sizeof *nodes);\n"
                 "for (long i = 0; i < NNODES; i++) nodes[i] = xalloc(sizeof(struct node));")
    init_val = "nodes[perm[i]]->val = (long)(i % 1000);" if has_val else ""
    if payload:
        walk = """
        __attribute__((noinline)) static struct node *walk(struct node *p, long steps, long *sum) {
          long s = 0;
          for (long i = 0; i < steps; i++) {
            s += p->val;
            p = p->next;
          }
          *sum += s;
          return p;
        }"""
        call = "p = walk(p, STEPS, &sum);"
    else:
        walk = """
        /* The loop is p = p->next alone: one load whose result is its own next address. */
        __attribute__((noinline)) static struct node *walk(struct node *p, long steps) {
          for (long i = 0; i < steps; i++) p = p->next;
          return p;
        }"""
        call = "p = walk(p, STEPS);\nsum += " + ("p->val;" if has_val else "1;")
    body = c("""
        #define NNODES ${n}L
        #define STEPS ${steps}L

        struct node {
          ${fields}
        };
        ${decl}
        ${walk}

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          ${alloc}
          /* Link the nodes into one cycle in a random order (Fisher-Yates). */
          uint32_t *perm = xalloc(NNODES * sizeof *perm);
          for (long i = 0; i < NNODES; i++) perm[i] = (uint32_t)i;
          uint64_t seed = 0x1234567ULL;
          for (long i = NNODES - 1; i > 0; i--) {
            long j = (long)rng_below(&seed, (uint64_t)i + 1);
            uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
          }
          for (long i = 0; i < NNODES; i++) {
            nodes[perm[i]]->next = nodes[perm[(i + 1) % NNODES]];
            ${init_val}
          }
          struct node *p = nodes[perm[0]];
          free(perm);
          long sum = 0;
          for (long u = 0; u < scale; u++) {
            ${call}
          }
          printf("${name} %ld\\n", sum);
          return 0;
        }
        """, n=n, steps=steps, fields=fields, decl=decl, walk=dedent_c(walk), alloc=alloc,
             init_val=init_val, call=call, name=name)
    ns = steps * geo.ns(NS_DEP, n * node_bytes)
    where = {"global": "a global array", "heap": "one malloc'd pool",
             "malloc_each": "one malloc per node"}[placement]
    pattern = (f"pointer chase through a shuffled singly linked cycle of {n} nodes of "
               f"{node_bytes} bytes ({fmt_bytes(n * node_bytes)} in {where})"
               + (", summing a payload" if payload else ", loop is p = p->next alone")
               + pattern_extra)
    return Program(name, "chase", {"nodes": n, "node_bytes": node_bytes, "placement": placement,
                                   "payload": payload, "steps_per_unit": steps},
                   pattern, body, ns, footprint=n * node_bytes)


def chase_tree(geo, name, pool_bytes):
    node_bytes = 32
    n = max(64, pool_bytes // node_bytes)
    depth = 1.39 * math.log2(n) + 1
    lookups = int(ST_ACCESSES / 2 / depth)
    body = c("""
        #define NNODES ${n}L
        #define LOOKUPS ${lookups}L

        struct tnode {
          uint64_t key;
          struct tnode *left, *right;
          uint64_t pad;
        };

        static struct tnode *insert(struct tnode *root, struct tnode *n) {
          if (root == NULL) return n;
          struct tnode *p = root;
          for (;;) {
            struct tnode **next = n->key < p->key ? &p->left : &p->right;
            if (*next == NULL) {
              *next = n;
              return root;
            }
            p = *next;
          }
        }

        __attribute__((noinline)) static const struct tnode *find(const struct tnode *p, uint64_t key) {
          while (p != NULL && p->key != key) p = key < p->key ? p->left : p->right;
          return p;
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          /* Nodes in one pool, in insertion order; keys are random, so the tree's shape (and
             a search's path through memory) is random. */
          struct tnode *pool = xcalloc(NNODES, sizeof(struct tnode));
          struct tnode *root = NULL;
          for (long i = 0; i < NNODES; i++) {
            pool[i].key = mix((uint64_t)i + 1);
            root = insert(root, &pool[i]);
          }
          uint64_t seed = 0xBEEFULL, sum = 0;
          for (long u = 0; u < scale; u++) {
            for (long k = 0; k < LOOKUPS; k++) {
              const struct tnode *hit = find(root, mix(rng_below(&seed, NNODES) + 1));
              sum += hit ? (hit->key & 0xff) : 1;
            }
          }
          printf("${name} %llu\\n", (unsigned long long)sum);
          return 0;
        }
        """, n=n, lookups=lookups, name=name)
    ns = lookups * depth * (NS_TREE + geo.ns(NS_DEP, n * node_bytes) / 4)
    return Program(name, "chase", {"nodes": n, "node_bytes": node_bytes,
                                   "lookups_per_unit": lookups},
                   f"binary search tree walk: random lookups in a BST of {n} random keys, "
                   f"{node_bytes}-byte nodes in one pool ({fmt_bytes(n * node_bytes)})",
                   body, ns, footprint=n * node_bytes)


def family_chase(geo):
    L1, L2 = geo.L1.size, geo.L2.size
    out = []
    for mult, lvl, base in ((2, "L1", L1), (8, "L1", L1), (2, "L2", L2)):
        out.append(chase_list(geo, f"chase_mov_{label(mult, lvl)}", mult * base, geo.line,
                              "heap", False))
    out.append(chase_list(geo, "chase_mov_8L2", 8 * L2, geo.line, "heap", False))
    out.append(chase_list(geo, "chase_payload_64L1", 64 * L1, geo.line, "heap", True))
    out.append(chase_list(geo, "chase_payload_8L2", 8 * L2, geo.line, "heap", True))
    out.append(chase_list(geo, "chase_small_0p5L1", L1 // 2, 16, "heap", True,
                          "; several nodes per line"))
    out.append(chase_list(geo, "chase_small_8L1", 8 * L1, 16, "heap", True,
                          "; several nodes per line"))
    out.append(chase_list(geo, "chase_global_8L1", 8 * L1, geo.line, "global", True))
    out.append(chase_list(geo, "chase_mallocs_2L2", 2 * L2, geo.line, "malloc_each", True))
    for mult, lvl, base in ((0.5, "L1", L1), (8, "L1", L1), (8, "L2", L2)):
        out.append(chase_tree(geo, f"chase_tree_{label(mult, lvl)}", int(mult * base)))
    return out


# ---------------------------------------------------------------------------------------------
# (b) stride: column walks over row-major matrices, and strided 1-D walks


def stride_column(geo, name, rows, row_bytes, pad, storage):
    cols = row_bytes // 8
    ld = (row_bytes + pad) // 8
    passes = max(1, ST_ACCESSES // (rows * cols))
    if storage == "global":
        decl, alloc = "static double m_storage[ROWS * LD];", "double *m = m_storage;"
    else:
        decl, alloc = "", "double *m = xalloc(sizeof(double) * ROWS * LD);"
    body = c("""
        #define ROWS ${rows}L
        #define COLS ${cols}L
        #define LD ${ld}L /* doubles from one row to the next */
        #define PASSES ${passes}L
        ${decl}

        /* Column by column through a row-major matrix: consecutive loads are LD*8 bytes apart. */
        __attribute__((noinline)) static double column_sum(const double *m) {
          double s = 0.0;
          for (long j = 0; j < COLS; j++)
            for (long i = 0; i < ROWS; i++) s += m[i * LD + j];
          return s;
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          ${alloc}
          for (long i = 0; i < ROWS; i++)
            for (long j = 0; j < LD; j++) m[i * LD + j] = (double)((i * 31 + j * 7) % 1000);
          double total = 0.0;
          for (long u = 0; u < scale; u++)
            for (long p = 0; p < PASSES; p++) {
              total += column_sum(m);
              m[(p % ROWS) * LD + p % COLS] += 1.0; /* so no pass can be skipped as redundant */
            }
          printf("${name} %.0f\\n", total);
          return 0;
        }
        """, rows=rows, cols=cols, ld=ld, passes=passes, decl=decl, alloc=alloc, name=name)
    foot = rows * (row_bytes + pad)
    ns = passes * rows * cols * geo.ns(NS_WALK, foot)
    stride = row_bytes + pad
    pow2 = stride & (stride - 1) == 0
    where = "a global" if storage == "global" else "a malloc'd"
    pattern = (f"column walk over {where} row-major {rows} x {cols} matrix of doubles, row stride "
               f"{stride} bytes ({'a power of two' if pow2 else f'padded by {pad} bytes'}); "
               f"matrix {fmt_bytes(foot)}")
    return Program(name, "stride", {"rows": rows, "cols": cols, "row_stride_bytes": stride,
                                    "pad_bytes": pad, "storage": storage,
                                    "passes_per_unit": passes},
                   pattern, body, ns, footprint=foot)


def stride_1d(geo, name, stride_bytes, count, storage):
    """Touches `count` elements stride_bytes apart, then the same shifted by 8 bytes, ... (the
    whole line), repeatedly."""
    n = stride_bytes * count // 8
    words = geo.line // 8
    per_pass = count * words
    passes = max(1, ST_ACCESSES // per_pass)
    if storage == "global":
        decl, alloc = "static uint64_t a_storage[N];", "uint64_t *a = a_storage;"
    else:
        decl, alloc = "", "uint64_t *a = xalloc(sizeof(uint64_t) * N);"
    body = c("""
        #define STRIDE ${stride}L /* in 8-byte words */
        #define COUNT ${count}L
        #define N ${n}L
        #define WORDS ${words}L
        #define PASSES ${passes}L
        ${decl}

        __attribute__((noinline)) static uint64_t strided_sum(const uint64_t *a) {
          uint64_t s = 0;
          for (long off = 0; off < WORDS; off++)
            for (long i = 0; i < COUNT; i++) s += a[i * STRIDE + off];
          return s;
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          ${alloc}
          for (long i = 0; i < N; i++) a[i] = (uint64_t)i * 2654435761u;
          uint64_t total = 0;
          for (long u = 0; u < scale; u++)
            for (long p = 0; p < PASSES; p++) {
              total += strided_sum(a);
              a[(p % COUNT) * STRIDE] += 1; /* so no pass can be skipped as redundant */
            }
          printf("${name} %llu\\n", (unsigned long long)total);
          return 0;
        }
        """, stride=stride_bytes // 8, count=count, n=n, words=words, passes=passes, decl=decl,
             alloc=alloc, name=name)
    touched = count * geo.line
    ns = passes * per_pass * geo.ns(NS_WALK, touched)
    pow2 = stride_bytes & (stride_bytes - 1) == 0
    where = "global" if storage == "global" else "malloc'd"
    pattern = (f"strided walk: {count} elements {stride_bytes} bytes apart "
               f"({'a power of two' if pow2 else 'not a power of two'}) in a "
               f"{fmt_bytes(n * 8)} {where} array, "
               f"then the next word of each line; {fmt_bytes(touched)} of lines touched")
    return Program(name, "stride", {"stride_bytes": stride_bytes, "count": count,
                                    "array_bytes": n * 8, "storage": storage,
                                    "passes_per_unit": passes},
                   pattern, body, ns, footprint=touched)


def family_stride(geo):
    L1, L2, line = geo.L1, geo.L2, geo.line
    out = []
    # Below L1: fewer rows than ways, a column's lines share a set but fit in it.
    small_rows = max(2, L1.ways // 2)
    out.append(stride_column(geo, "stride_col_pow2_below_L1", small_rows, L1.way_bytes, 0, "global"))
    # Between L1 and L2: more rows than L1 ways, power-of-two rows of 2 L1 ways' bytes.
    mid_rows = 4 * L1.ways
    mid_row = 2 * L1.way_bytes
    while mid_rows * mid_row > L2.size // 2 and mid_row > L1.way_bytes:
        mid_row //= 2
    for storage in ("global", "heap"):
        out.append(stride_column(geo, f"stride_col_pow2_{storage}_mid", mid_rows, mid_row, 0, storage))
        out.append(stride_column(geo, f"stride_col_pad_{storage}_mid", mid_rows, mid_row, line, storage))
    # Above L2: rows as long as an L2 way, twice as many rows as L2 ways.
    big_rows = 2 * L2.ways
    out.append(stride_column(geo, "stride_col_pow2_heap_big", big_rows, L2.way_bytes, 0, "heap"))
    out.append(stride_column(geo, "stride_col_pad_heap_big", big_rows, L2.way_bytes, line, "heap"))
    # 1-D: a stride of one L1 way (the same L1 set each time) vs one line more.
    count = 4 * L1.ways
    out.append(stride_1d(geo, "stride_1d_pow2_heap", L1.way_bytes, count, "heap"))
    out.append(stride_1d(geo, "stride_1d_pad_heap", L1.way_bytes + line, count, "heap"))
    # A stride of one L2 way: the same L1 and L2 set each time.
    out.append(stride_1d(geo, "stride_1d_l2way_global", L2.way_bytes, 2 * L2.ways, "global"))
    # Every other line of an array twice the size of L2.
    out.append(stride_1d(geo, "stride_1d_2lines_big", 2 * line, 4 * L2.size // (2 * line), "heap"))
    return out


# ---------------------------------------------------------------------------------------------
# (c) reuse: matrix products and repeated passes over arrays


def matmul(geo, name, n, order, tile):
    band = min(n, tile)
    bands = max(1, round(ST_ACCESSES / 2 / (band * n * n)))
    kernels = {
        "ijk": """
            for (long r = 0; r < BAND; r++) {
              long i = (i0 + r) % N;
              for (long j = 0; j < N; j++) {
                double s = 0.0;
                for (long k = 0; k < N; k++) s += A[i * N + k] * B[k * N + j];
                C[i * N + j] = s;
              }
            }""",
        "ikj": """
            for (long r = 0; r < BAND; r++) {
              long i = (i0 + r) % N;
              for (long j = 0; j < N; j++) C[i * N + j] = 0.0;
              for (long k = 0; k < N; k++) {
                double a = A[i * N + k];
                for (long j = 0; j < N; j++) C[i * N + j] += a * B[k * N + j];
              }
            }""",
        "blocked": """
            for (long r = 0; r < BAND; r++)
              for (long j = 0; j < N; j++) C[((i0 + r) % N) * N + j] = 0.0;
            for (long jj = 0; jj < N; jj += T) {
              long jend = jj + T < N ? jj + T : N;
              for (long kk = 0; kk < N; kk += T) {
                long kend = kk + T < N ? kk + T : N;
                for (long r = 0; r < BAND; r++) {
                  long i = (i0 + r) % N;
                  for (long k = kk; k < kend; k++) {
                    double a = A[i * N + k];
                    for (long j = jj; j < jend; j++) C[i * N + j] += a * B[k * N + j];
                  }
                }
              }
            }""",
    }
    body = c("""
        #define N ${n}L
        #define T ${tile}L    /* tile edge (blocked order) */
        #define BAND ${band}L /* rows of C computed per band */
        #define BANDS ${bands}L /* bands per unit */

        static double A[N * N], B[N * N], C[N * N];

        /* Rows i0 .. i0+BAND-1 (mod N) of C = A x B. */
        __attribute__((noinline)) static void band(long i0) {
          ${kernel}
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          for (long i = 0; i < N * N; i++) {
            A[i] = (double)(i % 13) - 6.0;
            B[i] = (double)(i % 7) - 3.0;
          }
          long next = 0;
          for (long u = 0; u < scale; u++)
            for (long b = 0; b < BANDS; b++) {
              band(next);
              next = (next + BAND) % N;
            }
          double s = 0.0;
          for (long i = 0; i < N * N; i += 7) s += C[i];
          printf("${name} %.0f\\n", s);
          return 0;
        }
        """, n=n, tile=tile, band=band, bands=bands, kernel=dedent_c(kernels[order]),
             name=name)
    foot = 3 * n * n * 8
    iters = bands * band * n * n
    per_iter = geo.ns(NS_SEQ, n * n * 8 if order != "blocked" else 3 * tile * tile * 8)
    words = {"ijk": "i-j-k (inner loop walks a column of B)",
             "ikj": "i-k-j (inner loop streams a row of B and of C)",
             "blocked": f"blocked i-k-j with {tile} x {tile} tiles"}[order]
    pow2 = n & (n - 1) == 0
    pattern = (f"matrix product C = A x B of {n} x {n} doubles"
               f"{' (a power of two)' if pow2 else ''}, {words}; three global matrices, "
               f"{fmt_bytes(foot)} together; {band} rows of C per band")
    return Program(name, "reuse", {"n": n, "order": order, "tile": tile, "band_rows": band,
                                   "bands_per_unit": bands},
                   pattern, body, iters * per_iter, footprint=foot)


def passes(geo, name, nbytes, rmw):
    n = nbytes // 8
    npass = max(1, ST_ACCESSES // (n * (2 if rmw else 1)))
    if rmw:
        kernel = "for (long i = 0; i < N; i++) a[i] = a[i] * 3 + 1;\nreturn a[N / 2];"
    else:
        kernel = "uint64_t s = 0;\nfor (long i = 0; i < N; i++) s += a[i];\nreturn s;"
    body = c("""
        #define N ${n}L
        #define PASSES ${npass}L

        __attribute__((noinline)) static uint64_t pass(uint64_t *a) {
          ${kernel}
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          uint64_t *a = xalloc(sizeof(uint64_t) * N);
          for (long i = 0; i < N; i++) a[i] = (uint64_t)i;
          uint64_t total = 0;
          for (long u = 0; u < scale; u++)
            for (long p = 0; p < PASSES; p++) {
              total += pass(a);
              a[p % N] += 1; /* so no pass can be skipped as redundant */
            }
          printf("${name} %llu\\n", (unsigned long long)total);
          return 0;
        }
        """, n=n, npass=npass, kernel=kernel, name=name)
    ns = npass * n * geo.ns(NS_SEQ, nbytes) * (2 if rmw else 1)
    what = "read-modify-write (a[i] = a[i]*3 + 1)" if rmw else "summing"
    return Program(name, "reuse", {"array_bytes": nbytes, "rmw": rmw, "passes_per_unit": npass},
                   f"repeated sequential passes {what} over a malloc'd {fmt_bytes(nbytes)} array",
                   body, ns, footprint=nbytes)


def family_reuse(geo):
    L1, L2 = geo.L1.size, geo.L2.size

    def fit_n(budget_bytes, per=24):  # largest multiple of 8 with per * n^2 <= budget
        return max(8, int(math.sqrt(budget_bytes / per)) // 8 * 8)

    tile = fit_n(L1 // 2)
    n_small = tile
    n_pow2 = 1 << int(math.log2(math.sqrt(L2 / 4 / 8)))  # B alone <= a quarter of L2
    n_mid = n_pow2 - 8
    n_big = int(round(math.sqrt(0.75 * L2 / 8) / 8)) * 8  # B alone ~3/4 of L2, all three > L2
    if n_big & (n_big - 1) == 0:
        n_big += 8
    out = [
        matmul(geo, "reuse_mm_ijk_small", n_small, "ijk", tile),
        matmul(geo, "reuse_mm_ijk_mid_pow2", n_pow2, "ijk", tile),
        matmul(geo, "reuse_mm_ijk_mid", n_mid, "ijk", tile),
        matmul(geo, "reuse_mm_ikj_mid", n_mid, "ikj", tile),
        matmul(geo, "reuse_mm_blocked_mid", n_mid, "blocked", tile),
        matmul(geo, "reuse_mm_ijk_big", n_big, "ijk", tile),
        matmul(geo, "reuse_mm_ikj_big", n_big, "ikj", tile),
        matmul(geo, "reuse_mm_blocked_big", n_big, "blocked", tile),
    ]
    for mult, lvl, base in ((0.5, "L1", L1), (2, "L1", L1), (0.5, "L2", L2), (2, "L2", L2),
                            (8, "L2", L2)):
        out.append(passes(geo, f"reuse_pass_{label(mult, lvl)}", int(mult * base) // 64 * 64, False))
    for mult, lvl, base in ((2, "L1", L1), (4, "L2", L2)):
        out.append(passes(geo, f"reuse_rmw_{label(mult, lvl)}", int(mult * base) // 64 * 64, True))
    return out


# ---------------------------------------------------------------------------------------------
# (d) random: random reads, random increments, an open-addressing hash table


def random_access(geo, name, nbytes, op):
    n = nbytes // 8
    per_unit = ST_ACCESSES // (2 if op == "inc" else 1)
    stmt = "s += a[rng_below(&seed, N)];" if op == "read" else "a[rng_below(&seed, N)]++;"
    body = c("""
        #define N ${n}L
        #define PER_UNIT ${per_unit}L

        __attribute__((noinline)) static uint64_t touch(uint64_t *a, uint64_t seed) {
          uint64_t s = 0;
          for (long k = 0; k < PER_UNIT; k++) ${stmt}
          return s + a[seed % N];
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          uint64_t *a = xalloc(sizeof(uint64_t) * N);
          for (long i = 0; i < N; i++) a[i] = (uint64_t)i;
          uint64_t total = 0;
          for (long u = 0; u < scale; u++) total += touch(a, 0x9E3779B97F4A7C15ULL + (uint64_t)u);
          printf("${name} %llu\\n", (unsigned long long)total);
          return 0;
        }
        """, n=n, per_unit=per_unit, stmt=stmt, name=name)
    ns = per_unit * (geo.ns(NS_RAND, nbytes) * (1.5 if op == "inc" else 1) + NS_RNG)
    what = "random reads" if op == "read" else "random increments (a histogram)"
    return Program(name, "random", {"array_bytes": n * 8, "op": op, "accesses_per_unit": per_unit},
                   f"{what} of a malloc'd {fmt_bytes(n * 8)} array of 8-byte words",
                   body, ns, footprint=n * 8)


def hash_table(geo, name, nbytes):
    cap = 1 << max(6, int(math.log2(nbytes // 16)))
    lookups = ST_ACCESSES // 3
    body = c("""
        #define CAP ${cap}L /* entries, a power of two; half of them used */
        #define LOOKUPS ${lookups}L

        struct entry {
          uint64_t key; /* 0: empty */
          uint64_t val;
        };

        static inline uint64_t slot_of(uint64_t key) { return (key * 0x9E3779B97F4A7C15ULL) >> ${shift}; }

        static void insert(struct entry *t, uint64_t key, uint64_t val) {
          uint64_t i = slot_of(key);
          while (t[i].key != 0 && t[i].key != key) i = (i + 1) & (CAP - 1);
          t[i].key = key;
          t[i].val = val;
        }

        __attribute__((noinline)) static uint64_t lookups(const struct entry *t, uint64_t seed) {
          uint64_t s = 0;
          for (long k = 0; k < LOOKUPS; k++) {
            /* Keys mix(1..CAP/2) are in the table, mix(CAP/2+1..CAP) are not. */
            uint64_t key = mix(rng_below(&seed, CAP) + 1);
            uint64_t i = slot_of(key);
            while (t[i].key != 0 && t[i].key != key) i = (i + 1) & (CAP - 1);
            s += t[i].key == key ? t[i].val : 1;
          }
          return s;
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          struct entry *t = xcalloc(CAP, sizeof(struct entry));
          for (long i = 0; i < CAP / 2; i++) insert(t, mix((uint64_t)i + 1), (uint64_t)i);
          uint64_t total = 0;
          for (long u = 0; u < scale; u++) total += lookups(t, 0xC0FFEEULL + (uint64_t)u);
          printf("${name} %llu\\n", (unsigned long long)total);
          return 0;
        }
        """, cap=cap, lookups=lookups, shift=64 - int(math.log2(cap)), name=name)
    ns = lookups * (geo.ns(NS_RAND, cap * 16) * 1.5 + NS_HASH)
    return Program(name, "random", {"entries": cap, "table_bytes": cap * 16,
                                    "lookups_per_unit": lookups},
                   f"open-addressing hash table (linear probing, half full) of {cap} 16-byte "
                   f"entries ({fmt_bytes(cap * 16)}, calloc'd): random lookups, half of them hits",
                   body, ns, footprint=cap * 16)


def family_random(geo):
    L1, L2 = geo.L1.size, geo.L2.size
    out = []
    for mult, lvl, base in ((0.5, "L1", L1), (4, "L1", L1), (0.5, "L2", L2), (2, "L2", L2),
                            (16, "L2", L2), (32, "L2", L2)):
        out.append(random_access(geo, f"random_read_{label(mult, lvl)}", int(mult * base), "read"))
    for mult, lvl, base in ((0.5, "L2", L2), (8, "L2", L2)):
        out.append(random_access(geo, f"random_inc_{label(mult, lvl)}", int(mult * base), "inc"))
    for mult, lvl, base in ((0.5, "L1", L1), (4, "L1", L1), (2, "L2", L2), (16, "L2", L2)):
        out.append(hash_table(geo, f"random_hash_{label(mult, lvl)}", int(mult * base)))
    return out


# ---------------------------------------------------------------------------------------------
# (e) perthread: each thread updates data of its own, packed into shared lines or padded


def per_thread_iters(threads):
    return MT_ITERS // threads


def perthread_counter(geo, name, threads, layout):
    iters = per_thread_iters(threads)
    setup, slot = "", ""
    if layout == "global_packed":
        decl = "static _Alignas(LINE) volatile long counters[NTHREADS]; /* 8 bytes each, one line */"
        slot = "volatile long *c = &counters[t];"
        words = "a global array of one 8-byte counter per thread (packed into one line)"
    elif layout == "global_padded":
        decl = ("struct slot {\n  volatile long v;\n  char pad[LINE - sizeof(long)];\n};\n"
                "static _Alignas(LINE) struct slot counters[NTHREADS]; /* a line each */")
        slot = "volatile long *c = &counters[t].v;"
        words = "a global array of per-thread counters, each padded to its own line"
    elif layout == "calloc_packed":
        decl = "static volatile long *counters; /* calloc(NTHREADS, 8) by the main thread */"
        setup = "counters = xcalloc(NTHREADS, sizeof(long));"
        slot = "volatile long *c = &counters[t];"
        words = "one calloc'd array of one 8-byte counter per thread (packed)"
    elif layout == "calloc_padded":
        decl = "static volatile long *counters; /* calloc(NTHREADS, LINE): a line-sized slot each */"
        setup = "counters = xcalloc(NTHREADS, LINE);"
        slot = "volatile long *c = &counters[t * (LINE / sizeof(long))];"
        words = "one calloc'd array of per-thread counters, one line-sized slot each"
    elif layout == "malloc_main":
        decl = "static volatile long *counters[NTHREADS]; /* malloc(16) each, by the main thread */"
        setup = ("for (long t = 0; t < NTHREADS; t++) {\n"
                 "  counters[t] = xalloc(16);\n  counters[t][0] = 0;\n}")
        slot = "volatile long *c = counters[t];"
        words = "a separate 16-byte malloc per thread, all allocated by the main thread in a row"
    elif layout == "malloc_own":
        decl = "static volatile long *counters[NTHREADS]; /* malloc(16) by each thread itself */"
        slot = "volatile long *c = xalloc(16);\nc[0] = 0;\ncounters[t] = c;"
        words = "a separate 16-byte malloc per thread, each allocated by its own thread"
    else:
        raise ValueError(layout)
    body = c("""
        #define ITERS ${iters}L /* per thread per unit */
        ${decl}
        static volatile long *where[NTHREADS]; /* each thread's counter */

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          ${slot}
          where[t] = c;
          pthread_barrier_wait(&start_line);
          for (long i = 0; i < units * ITERS; i++) c[0]++;
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          ${setup}
          run_threads(worker);
          long sum = 0;
          for (long t = 0; t < NTHREADS; t++) sum += ${read};
          /* The layout this build got: pairs of threads whose counters share a line. */
          int pairs = 0;
          for (int t = 0; t < NTHREADS; t++)
            for (int u = t + 1; u < NTHREADS; u++)
              pairs += (uintptr_t)where[t] / LINE == (uintptr_t)where[u] / LINE;
          printf("${name} %ld pairs_sharing_a_line=%d\\n", sum, pairs);
          return 0;
        }
        """, iters=iters, decl=decl, slot=slot,
             setup=setup, name=name,
             read={"global_packed": "counters[t]", "global_padded": "counters[t].v",
                   "calloc_packed": "counters[t]",
                   "calloc_padded": "counters[t * (LINE / sizeof(long))]"}.get(layout,
                                                                              "counters[t][0]"))
    ns = threads * iters * NS_COUNTER
    return Program(name, "perthread", {"threads": threads, "layout": layout,
                                       "iters_per_thread_per_unit": iters},
                   f"{threads} threads each increment a counter of their own (volatile load + "
                   f"store) in {words}", body, ns, threads=threads, footprint=threads * 64)


def perthread_handoff(geo, name):
    threads = 2
    iters = per_thread_iters(threads)
    body = c("""
        #define ITERS ${iters}L /* per thread per unit */
        #define NCAND 8
        static void *handed[NTHREADS];
        static volatile long *owned[NTHREADS];

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          /* Free the object handed over and allocate one of the same size: glibc's per-thread
             cache hands back the chunk just freed, now allocated by this thread. */
          free(handed[t]);
          volatile long *c = xalloc(16);
          c[0] = 0;
          owned[t] = c;
          pthread_barrier_wait(&start_line);
          for (long i = 0; i < units * ITERS; i++) c[0]++;
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          char *cand[NCAND];
          for (int i = 0; i < NCAND; i++) cand[i] = xalloc(16);
          int a = 0, b = 1;
          for (int i = 0; i < NCAND; i++)
            for (int j = i + 1; j < NCAND; j++)
              if ((uintptr_t)cand[i] / LINE == (uintptr_t)(cand[j] + 15) / LINE &&
                  (uintptr_t)cand[j] / LINE == (uintptr_t)(cand[i] + 15) / LINE) {
                a = i;
                b = j;
                i = j = NCAND;
              }
          handed[0] = cand[a];
          handed[1] = cand[b];
          cand[a] = cand[b] = NULL;
          run_threads(worker);
          long sum = owned[0][0] + owned[1][0];
          int pairs = (uintptr_t)owned[0] / LINE == (uintptr_t)owned[1] / LINE;
          for (int i = 0; i < NCAND; i++) free(cand[i]);
          printf("${name} %ld pairs_sharing_a_line=%d\\n", sum, pairs);
          return 0;
        }
        """, iters=iters, name=name)
    return Program(name, "perthread", {"threads": threads, "layout": "malloc_handoff",
                                       "iters_per_thread_per_unit": iters},
                   "2 threads each free a 16-byte object the main thread allocated (two picked "
                   "to share a line) and malloc one of the same size (glibc's tcache returns the "
                   "same chunk), then increment it: a line holds objects of two threads",
                   body, threads * iters * NS_COUNTER, threads=threads, footprint=64)


def perthread_chunks(geo, name, threads, nbytes, packed):
    n = nbytes // 8
    chunk = n // threads
    npass = max(1, per_thread_iters(threads) // chunk)
    if packed:
        decl = "static _Alignas(LINE) volatile uint64_t partial[NTHREADS]; /* packed */"
        loop = ("for (long p = 0; p < units * PASSES; p++)\n"
                "  for (long i = lo; i < hi; i++) partial[t] += a[i];")
        read = "partial[t]"
        words = "adding into a packed global array of per-thread partial sums (one slot each, "
        words += "written every iteration)"
    else:
        decl = "static uint64_t partial[NTHREADS];"
        loop = ("uint64_t s = 0;\nfor (long p = 0; p < units * PASSES; p++)\n"
                "  for (long i = lo; i < hi; i++) s += a[i];\npartial[t] = s;")
        read = "partial[t]"
        words = "each into a local sum, stored once at the end"
    body = c("""
        #define N ${n}L
        #define CHUNK ${chunk}L
        #define PASSES ${npass}L /* per unit */
        static uint64_t *a;
        ${decl}

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          long lo = t * CHUNK, hi = lo + CHUNK;
          pthread_barrier_wait(&start_line);
          ${loop}
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          a = xalloc(sizeof(uint64_t) * N);
          for (long i = 0; i < N; i++) a[i] = (uint64_t)(i % 1000);
          run_threads(worker);
          uint64_t sum = 0;
          for (long t = 0; t < NTHREADS; t++) sum += ${read};
          printf("${name} %llu\\n", (unsigned long long)sum);
          return 0;
        }
        """, n=n, chunk=chunk, npass=npass, decl=decl, loop=loop, read=read, name=name)
    iters = npass * chunk
    ns = threads * iters * (NS_COUNTER if packed else geo.ns(NS_SEQ, nbytes))
    return Program(name, "perthread", {"threads": threads, "array_bytes": n * 8,
                                       "packed_partials": packed, "passes_per_unit": npass},
                   f"{threads} threads sum their own chunk of a shared malloc'd "
                   f"{fmt_bytes(n * 8)} array, {words}", body, ns, threads=threads,
                   footprint=n * 8)


def family_perthread(geo):
    L1, L2 = geo.L1.size, geo.L2.size
    return [
        perthread_counter(geo, "perthread_global_packed_t2", 2, "global_packed"),
        perthread_counter(geo, "perthread_global_packed_t4", 4, "global_packed"),
        perthread_counter(geo, "perthread_global_packed_t8", 8, "global_packed"),
        perthread_counter(geo, "perthread_global_padded_t2", 2, "global_padded"),
        perthread_counter(geo, "perthread_global_padded_t8", 8, "global_padded"),
        perthread_counter(geo, "perthread_calloc_packed_t4", 4, "calloc_packed"),
        perthread_counter(geo, "perthread_calloc_padded_t4", 4, "calloc_padded"),
        perthread_counter(geo, "perthread_malloc_main_t4", 4, "malloc_main"),
        perthread_counter(geo, "perthread_malloc_own_t4", 4, "malloc_own"),
        perthread_handoff(geo, "perthread_malloc_handoff_t2"),
        perthread_chunks(geo, "perthread_chunks_packed_0p5L1", 4, L1 // 2, True),
        perthread_chunks(geo, "perthread_chunks_packed_4L2", 4, 4 * L2, True),
        perthread_chunks(geo, "perthread_chunks_local_4L2", 4, 4 * L2, False),
    ]


# ---------------------------------------------------------------------------------------------
# (f) shared: several threads update the same counter, or read one shared table


def shared_counter(geo, name, threads, how):
    iters = per_thread_iters(threads)
    if how == "atomic":
        decl = "static _Atomic long counter;"
        stmt = "atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);"
        read = "atomic_load(&counter)"
        words = "one global counter with an atomic fetch-add (relaxed)"
    elif how == "mutex":
        # The program counts the lock's hand-overs itself (a tenure that follows another
        # thread's), inside the critical section: the corpus bench compares how often the lock
        # changed hands natively and under exact mode, whose interleaving can change it.
        decl = ("static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;\n"
                "static long counter, holder = -1, handovers;")
        stmt = ("pthread_mutex_lock(&lock);\ncounter++;\n"
                "if (holder != t) { holder = t; handovers++; }\n"
                "pthread_mutex_unlock(&lock);")
        read = "counter"
        words = "one global counter, incremented under one pthread mutex"
    else:
        decl = "static volatile long counter; /* updates race on purpose */"
        stmt = "counter++;"
        read = "counter"
        words = "one plain global counter (volatile, racy: no synchronisation)"
    body = c("""
        #define ITERS ${iters}L /* per thread per unit */
        ${decl}

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          (void)t;
          pthread_barrier_wait(&start_line);
          for (long i = 0; i < units * ITERS; i++) {
            ${stmt}
          }
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          run_threads(worker);
          printf("${name} %ld${extra_fmt}\\n", (long)${read}${extra_arg});
          return 0;
        }
        """, iters=iters, decl=decl, stmt=stmt, read=read, name=name,
        extra_fmt=" handovers=%ld" if how == "mutex" else "",
        extra_arg=", handovers" if how == "mutex" else "")
    ns = threads * iters * NS_SHARED[how]
    return Program(name, "shared", {"threads": threads, "sync": how,
                                    "iters_per_thread_per_unit": iters},
                   f"{threads} threads update {words}", body, ns, threads=threads, footprint=64)


def shared_readonly(geo, name, threads, nbytes):
    n = nbytes // 8
    iters = per_thread_iters(threads)
    body = c("""
        #define N ${n}L
        #define ITERS ${iters}L /* per thread per unit */
        static uint64_t *table;
        static uint64_t result[NTHREADS];

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          uint64_t seed = 0x5EEDULL + (uint64_t)t * 7919, s = 0;
          pthread_barrier_wait(&start_line);
          for (long i = 0; i < units * ITERS; i++) s += table[rng_below(&seed, N)];
          result[t] = s;
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          table = xalloc(sizeof(uint64_t) * N);
          for (long i = 0; i < N; i++) table[i] = mix((uint64_t)i + 1) & 0xffff;
          run_threads(worker);
          uint64_t sum = 0;
          for (long t = 0; t < NTHREADS; t++) sum += result[t];
          printf("${name} %llu\\n", (unsigned long long)sum);
          return 0;
        }
        """, n=n, iters=iters, name=name)
    ns = threads * iters * (geo.ns(NS_RAND, nbytes) + NS_RNG)
    return Program(name, "shared", {"threads": threads, "table_bytes": n * 8,
                                    "reads_per_thread_per_unit": iters},
                   f"{threads} threads read random words of one shared, read-only malloc'd "
                   f"{fmt_bytes(n * 8)} table", body, ns, threads=threads, footprint=n * 8)


def family_shared(geo):
    L1, L2 = geo.L1.size, geo.L2.size
    out = []
    for how in ("atomic", "mutex", "racy"):
        for t in (2, 4):
            out.append(shared_counter(geo, f"shared_{how}_t{t}", t, how))
    out.append(shared_readonly(geo, "shared_readonly_0p5L1_t2", 2, L1 // 2))
    out.append(shared_readonly(geo, "shared_readonly_4L2_t2", 2, 4 * L2))
    return out


# ---------------------------------------------------------------------------------------------
# (g) control: everything fits in L1


def control_private_threads(geo, name, threads, nbytes):
    n = nbytes // 8
    npass = max(1, per_thread_iters(threads) // n)
    body = c("""
        #define N ${n}L
        #define PASSES ${npass}L /* per thread per unit */
        static uint64_t result[NTHREADS];

        static void *worker(void *arg) {
          long t = (long)(intptr_t)arg;
          uint64_t *a = xalloc(sizeof(uint64_t) * N); /* by this thread, read by it alone */
          for (long i = 0; i < N; i++) a[i] = (uint64_t)(i + t);
          pthread_barrier_wait(&start_line);
          uint64_t s = 0;
          for (long p = 0; p < units * PASSES; p++) {
            for (long i = 0; i < N; i++) s += a[i];
            a[p % N] += 1;
          }
          result[t] = s;
          free(a);
          return NULL;
        }

        int main(int argc, char **argv) {
          units = parse_scale(argc, argv);
          run_threads(worker);
          uint64_t sum = 0;
          for (long t = 0; t < NTHREADS; t++) sum += result[t];
          printf("${name} %llu\\n", (unsigned long long)sum);
          return 0;
        }
        """, n=n, npass=npass, name=name)
    ns = threads * npass * n * geo.ns(NS_SEQ, nbytes)
    return Program(name, "control", {"threads": threads, "array_bytes": n * 8,
                                     "passes_per_unit": npass},
                   f"{threads} threads each sum an {fmt_bytes(n * 8)} array they malloc'd "
                   f"themselves, repeatedly (fits in L1)", body, ns, threads=threads,
                   footprint=n * 8)


def control_compute(geo, name):
    iters = ST_ACCESSES
    body = c("""
        #define ITERS ${iters}L
        static uint8_t table[256];

        __attribute__((noinline)) static uint64_t crunch(uint64_t x) {
          uint64_t h = 0;
          for (long i = 0; i < ITERS; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            h += table[x >> 56] ^ (x >> 17);
          }
          return h;
        }

        int main(int argc, char **argv) {
          long scale = parse_scale(argc, argv);
          for (int i = 0; i < 256; i++) table[i] = (uint8_t)(i * 37 + 11);
          uint64_t total = 0;
          for (long u = 0; u < scale; u++) total += crunch((uint64_t)u + 1);
          printf("${name} %llu\\n", (unsigned long long)total);
          return 0;
        }
        """, iters=iters, name=name)
    return Program(name, "control", {"iterations_per_unit": iters},
                   "arithmetic (a 64-bit LCG) with one lookup per iteration in a 256-byte table",
                   body, iters * NS_COMPUTE, footprint=256)


def family_control(geo):
    L1 = geo.L1.size
    quarter = L1 // 4 // 64 * 64
    out = [passes(geo, "control_sum_0p25L1", quarter, False),
           chase_list(geo, "control_chase_0p25L1", quarter, geo.line, "heap", False),
           random_access(geo, "control_random_0p25L1", quarter, "read"),
           matmul(geo, "control_mm_small", max(8, int(math.sqrt(L1 / 8 / 24)) // 8 * 8), "ikj",
                  max(8, int(math.sqrt(L1 / 8 / 24)) // 8 * 8)),
           control_private_threads(geo, "control_private_t2", 2, L1 // 8),
           control_compute(geo, "control_compute")]
    for p in out:
        p.family = "control"
        p.pattern += " (a control: expected to fit in L1)"
    return out


FAMILY_FUNCS = {"chase": family_chase, "stride": family_stride, "reuse": family_reuse,
                "random": family_random, "perthread": family_perthread, "shared": family_shared,
                "control": family_control}


def all_programs(geo):
    progs = []
    for fam in FAMILIES:
        progs.extend(FAMILY_FUNCS[fam](geo))
    names = [p.name for p in progs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise RuntimeError(f"duplicate program names: {sorted(dup)}")
    return progs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--cache", help="geometry, e.g. L1=48K:12:64,L2=1M:16:64,L3=32M:16:64 "
                                    "(default: cpu0's caches in sysfs)")
    ap.add_argument("--family", action="append", choices=FAMILIES,
                    help="only these families (repeatable)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these programs")
    ap.add_argument("--list", action="store_true", help="print name and family, write nothing")
    a = ap.parse_args()
    if not a.list and not a.outdir:
        ap.error("OUTDIR is required (or --list)")

    try:
        levels = parse_cache_spec(a.cache) if a.cache else read_sysfs_cache()
    except (ValueError, RuntimeError, OSError) as e:
        sys.exit(f"gen.py: {e}")
    if len(levels) < 2:
        sys.exit("gen.py: need at least L1 and L2")
    geo = Geometry(levels)
    progs = all_programs(geo)
    if a.family:
        progs = [p for p in progs if p.family in a.family]
    if a.only:
        unknown = set(a.only) - {p.name for p in progs}
        if unknown:
            sys.exit(f"gen.py: unknown program(s): {' '.join(sorted(unknown))}")
        progs = [p for p in progs if p.name in a.only]
    if a.list:
        for p in progs:
            print(p.name, p.family)
        return 0

    os.makedirs(a.outdir, exist_ok=True)
    entries = []
    for p in progs:
        src = p.source(geo)
        path = os.path.join(a.outdir, f"{p.name}.c")
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        if old != src:  # leave unchanged files alone, so builds stay up to date
            with open(path + ".tmp", "w") as f:
                f.write(src)
            os.replace(path + ".tmp", path)
        entries.append(p.entry(geo, src))
    manifest = {
        "generator": "tests/corpus/gen.py",
        "cache": [{"level": lv.name, "size": lv.size, "ways": lv.ways, "line": lv.line}
                  for lv in levels],
        "cache_spec": geo.spec(),
        "cache_source": "--cache" if a.cache else SYSFS_CACHE,
        "soft_cpu_seconds_target": SOFT_CPU_SECONDS,
        "programs": entries,
    }
    text = json.dumps(manifest, indent=1) + "\n"
    mpath = os.path.join(a.outdir, "manifest.json")
    old = open(mpath).read() if os.path.exists(mpath) else None
    if old != text:
        with open(mpath + ".tmp", "w") as f:
            f.write(text)
        os.replace(mpath + ".tmp", mpath)
    print(f"gen.py: {len(entries)} programs for {geo.spec()} in {a.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
