/*
 * spatial.c -- spatial use by construction (known answer for the `fields` view's spatial use;
 * run with L1=32K:8:64).
 *
 * struct rec and struct full are both 64 bytes: eight 8-byte fields, one element a line
 * (arrays aligned to 64). Each array has 4096 elements (256 KiB, 8 x L1), so a sweep evicts
 * every line it fetched before the next sweep comes back to it.
 * Phase 1 sweeps the struct rec array ROUNDS times reading only `key`: every evicted line had 8
 *   of its 64 bytes touched, so spatial use is 8/64 = 12.5% and a..g (56 bytes, never touched)
 *   ride along.
 * Phase 2 sweeps the struct full array ROUNDS times reading all eight fields: every evicted line
 *   had all its bytes touched, spatial use 100%, no field rides along.
 * The arrays are never written (their values do not matter, only which bytes are read), so no
 *   initialising pass touches the cold fields; lines still in L1 at the end are not counted.
 * More than one sweep makes the later misses capacity misses (the objects then have misses the
 * profile records, and their types are known).
 *
 * Usage: spatial
 */
#include <stdio.h>
#include <stdlib.h>

#define N 4096
#define ROUNDS 6

struct rec {
  long key;
  long a, b, c, d, e, f, g;
};

struct full {
  long key;
  long a, b, c, d, e, f, g;
};

int main(void) {
  struct rec *recs = aligned_alloc(64, N * sizeof *recs);
  struct full *fulls = aligned_alloc(64, N * sizeof *fulls);
  if (!recs || !fulls) return 1;
  long sum = 0;
  for (int r = 0; r < ROUNDS; ++r)
    for (long i = 0; i < N; ++i) sum += ((volatile struct rec *)recs)[i].key;
  for (int r = 0; r < ROUNDS; ++r)
    for (long i = 0; i < N; ++i) {
      volatile struct full *x = &((volatile struct full *)fulls)[i];
      sum += x->key + x->a + x->b + x->c + x->d + x->e + x->f + x->g;
    }
  printf("%ld\n", sum);
  free(recs);
  free(fulls);
  return 0;
}
