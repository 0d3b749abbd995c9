/*
 * conflict_stride_heap.c -- APPLICATION-induced conflict misses in HEAP objects.
 *
 * Problem: two heap matrices `a` and `b` of 128 x 128 doubles (128 KiB each,
 *   so glibc mmaps both: they start at the same offset within a page) are
 *   walked column by column together (for j: for i: sum += a[i][j] * b[i][j]),
 *   a stencil's access pattern.  The row stride is 1 KiB, a power of two:
 *   with 64 L1 sets of 64-byte lines, one column of ONE matrix puts 32 lines
 *   into each of 4 sets, more than any L1 has ways, although the two columns
 *   (256 lines) fit easily in a fully-associative cache of the same size and
 *   would be reused by the next 7 columns.  The objects do sit at the same
 *   set offset, but that is not the cause: each matrix conflicts with
 *   itself, and staggering their starts changes nothing.
 * Fix (-DWHYMISS_FIXED): pad each row to 128 + 8 doubles (1088-byte stride,
 *   17 lines), so a column spreads over all sets.  Same values, same
 *   summation order, same result.
 * Expected report for the buggy build: kind = conflict (L1), origin =
 *   application (the conflicting lines of each object are evicted by the
 *   same object's own lines), suggestion: pad the rows; hot instructions:
 *   the loads of a[i][j] and b[i][j] in column_dot().
 *
 * Usage: conflict_stride_heap [scale]   (scale >= 1 multiplies the passes)
 * Output: one checksum line, identical for the buggy and the fixed build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define N 128
#ifndef WHYMISS_FIXED
#define LD N /* 1 KiB row stride */
#else
#define LD (N + 8) /* 1088-byte row stride */
#endif
#define PASSES_PER_SCALE 20

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

static double *alloc_matrix(void) {
  double *m = malloc(sizeof(double) * N * LD);
  if (m == NULL) {
    fprintf(stderr, "malloc failed\n");
    exit(1);
  }
  return m;
}

/* Column-major walk of two row-major matrices. */
static double column_dot(const double *a, const double *b) {
  double sum = 0.0;
  for (int j = 0; j < N; j++)
    for (int i = 0; i < N; i++)
      sum += a[i * LD + j] * b[i * LD + j];
  return sum;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  double *a = alloc_matrix(), *b = alloc_matrix();

  /* Small integer values: every partial sum is exact in a double. */
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      a[i * LD + j] = (double)((i * 7 + j) % 16);
      b[i * LD + j] = (double)((i + j * 3) % 16);
    }

  double total = 0.0;
  for (long p = 0; p < passes; p++)
    total += column_dot(a, b);
  free(a);
  free(b);
  printf("conflict_stride_heap checksum=%.0f\n", total);
  return 0;
}
