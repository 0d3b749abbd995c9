/*
 * spatial_threads.c -- spatial.c's struct rec sweep in four threads at once (known answer for the
 * runtime's concurrent path; run with L1=32K:8:64).
 *
 * Each thread allocates its own array of 4096 64-byte struct rec (256 KiB, 8 x L1) and sweeps it
 * ROUNDS times reading only `key`, so every evicted line of every array had 8 of its 64 bytes
 * touched: spatial use 12.5%, a..g riding along, four objects. The threads' accesses reach the
 * simulator concurrently (or through the relay), which the counts must survive unchanged.
 *
 * Usage: spatial_threads
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096
#define ROUNDS 6
#define THREADS 4

struct rec {
  long key;
  long a, b, c, d, e, f, g;
};

static void *sweep(void *arg) {
  (void)arg;
  struct rec *recs = aligned_alloc(64, N * sizeof *recs);
  if (!recs) return NULL;
  long sum = 0;
  for (int r = 0; r < ROUNDS; ++r)
    for (long i = 0; i < N; ++i) sum += ((volatile struct rec *)recs)[i].key;
  free(recs);
  return (void *)sum;
}

int main(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; ++i)
    if (pthread_create(&t[i], NULL, sweep, NULL) != 0) return 1;
  long sum = 0;
  for (int i = 0; i < THREADS; ++i) {
    void *s;
    pthread_join(t[i], &s);
    sum += (long)s;
  }
  printf("%ld\n", sum);
  return 0;
}
