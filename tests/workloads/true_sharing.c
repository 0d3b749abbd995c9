/*
 * true_sharing.c -- true sharing (APPLICATION).
 *
 * Problem: two threads both add to ONE shared global counter `counter` with
 *   __atomic_fetch_add (relaxed) on every iteration; the line holding the
 *   counter ping-pongs between the cores and both threads touch the same
 *   bytes.
 * Fix (-DWHYMISS_FIXED): each thread accumulates into a local variable and
 *   adds it to the shared counter once, at the end.
 * Expected report for the buggy build: kind = true sharing (coherence
 *   misses on the line of global `counter`, both threads accessing the same
 *   word), origin = application; hot instruction: the atomic add in
 *   worker().  The fixed build must show no significant coherence misses.
 *
 * Usage: true_sharing [scale]   (scale >= 1 multiplies the iterations)
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
#define ITERS_PER_SCALE 1000000UL /* additions per thread at scale 1 */

static long counter; /* shared by all threads */
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

/* A small per-iteration amount, so the work is not a constant. */
static inline long amount(unsigned long i, size_t t) { return (long)(((i ^ t) & 7u) + 1u); }

static void *worker(void *arg) {
  size_t t = (size_t)(uintptr_t)arg;
  pthread_barrier_wait(&start_line);
#ifndef WHYMISS_FIXED
  for (unsigned long i = 0; i < iters; i++)
    __atomic_fetch_add(&counter, amount(i, t), __ATOMIC_RELAXED);
#else
  long local = 0;
  for (unsigned long i = 0; i < iters; i++)
    local += amount(i, t);
  __atomic_fetch_add(&counter, local, __ATOMIC_RELAXED);
#endif
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
  for (size_t t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  printf("true_sharing checksum=%ld\n", __atomic_load_n(&counter, __ATOMIC_RELAXED));
  return 0;
}
