/*
 * false_sharing_app.c -- APPLICATION-induced false sharing.
 *
 * Problem: a global struct `counters` holds one counter per thread in
 *   adjacent 8-byte words of ONE 64-byte cache line (the struct is 64-byte
 *   aligned so that this is certain).  Two threads each increment only their
 *   own word, through a volatile lvalue so that every iteration performs a
 *   real load and store.  Every store invalidates the other core's copy of
 *   the line although the threads never touch the same bytes.
 * Fix (-DWHYMISS_FIXED): each counter sits in its own 64-byte-aligned,
 *   64-byte-sized slot, so the two threads write different lines.
 * Expected report for the buggy build: kind = false sharing (coherence
 *   misses on the line of global `counters`, written by two threads at
 *   different offsets), origin = application (one global object, not heap
 *   objects placed by the allocator); hot instruction: the increment in
 *   worker().  The fixed build must show no significant coherence misses.
 *
 * Usage: false_sharing_app [scale]   (scale >= 1 multiplies the iterations)
 * Output: one checksum line, identical for the buggy and the fixed build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 2
/* Both threads start their loops together, so they really run concurrently. */
static pthread_barrier_t start_line;
#define ITERS_PER_SCALE 1000000UL /* increments per thread at scale 1 */

#ifndef WHYMISS_FIXED
/* Both counters in one cache line. */
static struct {
  _Alignas(64) volatile long count[NTHREADS];
} counters;
#define COUNTER(t) (counters.count[(t)])
#else
/* One cache line per counter. */
static struct {
  _Alignas(64) volatile long count;
} counters[NTHREADS];
#define COUNTER(t) (counters[(t)].count)
#endif

static unsigned long iters;

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

static void *worker(void *arg) {
  size_t t = (size_t)(uintptr_t)arg;
  pthread_barrier_wait(&start_line);
  for (unsigned long i = 0; i < iters; i++)
    COUNTER(t)++; /* volatile: one load + one store per iteration */
  return NULL;
}

int main(int argc, char **argv) {
  iters = ITERS_PER_SCALE * (unsigned long)parse_scale(argc, argv);

  pthread_t th[NTHREADS];
  pthread_barrier_init(&start_line, NULL, NTHREADS);
  for (size_t t = 0; t < NTHREADS; t++) {
    if (pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  long sum = 0;
  for (size_t t = 0; t < NTHREADS; t++) {
    pthread_join(th[t], NULL);
    sum += COUNTER(t);
  }
  printf("false_sharing_app checksum=%ld\n", sum);
  return 0;
}
