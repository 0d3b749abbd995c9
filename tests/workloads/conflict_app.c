/*
 * conflict_app.c -- APPLICATION-induced conflict misses.
 *
 * Problem: one global matrix `m` of 64 rows x 1024 doubles has a row stride
 *   of exactly 8 KiB (a power of two).  It is walked column by column
 *   (for j: for i: sum += m[i][j]).  The 64 lines touched by one column are
 *   8 KiB apart, so with 64-byte lines and 64 L1 sets (48 KiB, 12-way) they
 *   all map to ONE L1 set: 64 lines cycle through 12 ways, and every access
 *   misses, although the 64 lines (4 KiB) would easily stay in a
 *   fully-associative cache of the same size (768 lines) and be reused for
 *   the next 7 columns.  (In the 1 MiB 16-way L2 they spread over 8 sets and
 *   fit, so the conflict is an L1 phenomenon.)  Repeated for several passes.
 * Fix (-DWHYMISS_FIXED): pad each row to 1024 + 8 doubles (stride 8256 bytes
 *   = 129 lines), so consecutive rows fall into consecutive sets.  Same
 *   values, same summation order, same result.
 * Expected report for the buggy build: kind = conflict (L1 misses
 *   concentrated on one cache set), origin = application (a single global
 *   object, `m`, whose own layout/stride causes the conflict); hot
 *   instruction: the load of m[i][j] in column_sum().  The fixed build keeps
 *   only ~1/8 of the L1 misses (capacity/compulsory).
 *
 * Usage: conflict_app [scale]   (scale >= 1 multiplies the passes)
 * Output: one checksum line, identical for the buggy and the fixed build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 64
#define COLS 1024
#ifndef WHYMISS_FIXED
#define LD COLS /* 8 KiB row stride: a column maps to one L1 set */
#else
#define LD (COLS + 8) /* 8256-byte stride: rows spread over the sets */
#endif
#define PASSES_PER_SCALE 24

static double m[ROWS][LD];

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

/* Column-major walk of a row-major matrix. */
static double column_sum(void) {
  double sum = 0.0;
  for (int j = 0; j < COLS; j++)
    for (int i = 0; i < ROWS; i++)
      sum += m[i][j];
  return sum;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);

  /* Small integer values: every partial sum is exact in a double. */
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < COLS; j++)
      m[i][j] = (double)((i * 31 + j * 7) % 1000);

  double total = 0.0;
  for (long p = 0; p < passes; p++)
    total += column_sum();
  printf("conflict_app checksum=%.0f\n", total);
  return 0;
}
