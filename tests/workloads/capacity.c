/*
 * capacity.c -- capacity misses (APPLICATION).
 *
 * Problem: one 8 MiB heap array (far larger than the 48 KiB L1 and the
 *   1 MiB L2) is updated in place, a[i] = a[i]*3 + 1, by 8 full sequential
 *   passes.  Each pass evicts the data before the next pass comes back to
 *   it: after the first (compulsory) pass every line misses again in L1 and
 *   L2, and would also miss in a fully-associative cache of the same size.
 * Fix (-DWHYMISS_FIXED): loop tiling with the passes fused.  The array is
 *   processed in 32 KiB blocks: a block is initialised, updated by all
 *   passes and summed (staying in L1, and a fortiori in L2) before moving on
 *   to the next.  Each element undergoes
 *   the same sequence of updates, so the result is identical.  (A 256 KiB
 *   block would fix L2 only; 32 KiB removes the capacity misses of both.)
 * Expected report for the buggy build: kind = capacity (L1 and L2), origin
 *   = application (heap object from `malloc` in main(), but a single object
 *   simply too big for the cache: no set concentration, no sharing); hot
 *   instruction: the load/store of a[i] in update().  The fixed build keeps
 *   only the compulsory misses of the first touch of each line.
 *
 * Usage: capacity [scale]   (scale >= 1 multiplies the passes)
 * Output: one checksum line, identical for the buggy and the fixed build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ARRAY_BYTES (8u * 1024u * 1024u)
#define N (ARRAY_BYTES / sizeof(uint64_t))
#define BLOCK ((32u * 1024u) / sizeof(uint64_t)) /* tile of the fixed build */
#define PASSES_PER_SCALE 8

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

static void update(uint64_t *a, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++)
    a[i] = a[i] * 3u + 1u;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  uint64_t *a = malloc(ARRAY_BYTES);
  if (a == NULL) {
    fprintf(stderr, "malloc failed\n");
    return 1;
  }
  uint64_t sum = 0;
#ifndef WHYMISS_FIXED
  for (size_t i = 0; i < N; i++) a[i] = i;
  for (long p = 0; p < passes; p++)
    update(a, 0, N);
  for (size_t i = 0; i < N; i++) sum += a[i] ^ i;
#else
  /* Every pass over a block, from initialisation to checksum, happens while it is in cache. */
  for (size_t b = 0; b < N; b += BLOCK) {
    size_t e = b + BLOCK < N ? b + BLOCK : N;
    for (size_t i = b; i < e; i++) a[i] = i;
    for (long p = 0; p < passes; p++)
      update(a, b, e);
    for (size_t i = b; i < e; i++) sum += a[i] ^ i;
  }
#endif
  free(a);
  printf("capacity checksum=%llu\n", (unsigned long long)sum);
  return 0;
}
