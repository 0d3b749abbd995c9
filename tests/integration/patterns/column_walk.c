/*
 * column_walk.c -- capacity misses of a strided (column) walk.
 * A 2048 x 264 matrix of doubles (2112-byte rows: 33 lines, so the column spreads over every
 * L1 set, no conflict) is summed column by column. Each column touches 2048 lines, more than
 * any L1 holds, so the line a column used is gone when the next column comes back to it.
 * Expected: capacity at L1, pattern "strided", stride 2112 bytes; fix: interchange the loops.
 */
#include <stdio.h>
#include <stdlib.h>

#define ROWS 2048
#define COLS 264

int main(int argc, char **argv) {
  const long passes = 2 * (argc > 1 ? atol(argv[1]) : 1); /* optional scale */
  double *m = malloc(sizeof(double) * ROWS * COLS);
  if (!m) return 1;
  for (int i = 0; i < ROWS * COLS; i++) m[i] = (double)(i % 7);
  double sum = 0;
  for (long pass = 0; pass < passes; pass++)
    for (int j = 0; j < COLS; j++)
      for (int i = 0; i < ROWS; i++) sum += m[(size_t)i * COLS + j];
  printf("column_walk %.0f\n", sum);
  free(m);
  return 0;
}
