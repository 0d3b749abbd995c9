/*
 * zero_init.c -- zero-initialised heap arrays and unaligned loads (a native-build check).
 *
 * Two 4 MiB arrays of doubles are zero-initialised the two usual ways: `a` by malloc and a
 * zeroing loop, `b` by malloc and memset(0). Natively GCC and Clang turn both into calloc,
 * whose fresh mmap'ed pages are never written; exact mode counts only what the whymiss-cc
 * build does. Then 4 passes of a three-point stencil read `a` and write `b` (and back), and a
 * checksum reads `b` through the unaligned-load idiom memcpy(&v, p, 8), natively one load.
 * Used by bench/compare_cachegrind.py (issue 18): per-line misses against cachegrind.
 *
 * Usage: zero_init [scale]   (scale >= 1 multiplies the stencil passes)
 * Output: one checksum line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N ((4u * 1024u * 1024u) / sizeof(double))
#define PASSES_PER_SCALE 4

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

static double *zeroed_by_loop(size_t n) {
  double *a = malloc(n * sizeof *a);
  if (a == NULL) return NULL;
  for (size_t i = 0; i < n; i++)
    a[i] = 0.0;
  return a;
}

static double *zeroed_by_memset(size_t n) {
  double *b = malloc(n * sizeof *b);
  if (b == NULL) return NULL;
  memset(b, 0, n * sizeof *b);
  return b;
}

static void stencil(double *restrict out, const double *restrict in, size_t n, double bias) {
  for (size_t i = 1; i + 1 < n; i++)
    out[i] = (in[i - 1] + in[i] + in[i + 1]) * (1.0 / 3.0) + bias;
}

static uint64_t checksum(const unsigned char *p, size_t bytes) {
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v;
    // One line: natively the load is folded into the add (one instruction, the add's line).
    memcpy(&v, p + i, sizeof v), sum += v;
  }
  return sum;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  double *a = zeroed_by_loop(N);
  double *b = zeroed_by_memset(N);
  if (a == NULL || b == NULL) {
    fprintf(stderr, "malloc failed\n");
    return 1;
  }
  for (long p = 0; p < passes; p++) {
    stencil(b, a, N, (double)p);
    stencil(a, b, N, 1.0);
  }
  printf("%llu\n", (unsigned long long)checksum((const unsigned char *)b, N * sizeof *b));
  free(a);
  free(b);
  return 0;
}
