/*
 * stress_many_threads.c -- 100 threads alive at once (robustness test for
 * the profiler, no cache problem, no fixed twin).
 *
 * Spawns 100 threads that all meet at a barrier, so they are all alive and
 * running concurrently; after the barrier each does some memory work on a
 * private buffer and adds to a shared atomic total; then main joins them.
 * A profiler must cope with more threads than simulated cores / perf
 * events it would like, per-thread buffers for all of them, etc.
 *
 * Usage: stress_many_threads [scale]   (scale >= 1 multiplies per-thread work)
 * Output: one checksum line; exit status 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 100
#define WORDS 2048 /* 16 KiB per thread */
#define PASSES_PER_SCALE 8

static pthread_barrier_t barrier;
static uint64_t total;
static long passes;

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
  uint64_t id = (uint64_t)(uintptr_t)arg;
  uint64_t *buf = malloc(WORDS * sizeof *buf);
  if (buf == NULL) {
    fprintf(stderr, "malloc failed\n");
    exit(1);
  }
  for (unsigned i = 0; i < WORDS; i++) buf[i] = id * 1315423911u + i;

  pthread_barrier_wait(&barrier); /* all NTHREADS threads alive here */

  uint64_t s = 0;
  for (long p = 0; p < passes; p++)
    for (unsigned i = 0; i < WORDS; i++) {
      buf[i] = buf[i] * 5u + (uint64_t)p;
      s += buf[i] >> 3;
    }
  free(buf);
  __atomic_fetch_add(&total, s, __ATOMIC_RELAXED);
  return NULL;
}

int main(int argc, char **argv) {
  passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  if (pthread_barrier_init(&barrier, NULL, NTHREADS) != 0) {
    fprintf(stderr, "pthread_barrier_init failed\n");
    return 1;
  }
  pthread_t th[NTHREADS];
  for (unsigned t = 0; t < NTHREADS; t++) {
    int rc = pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    if (rc != 0) {
      /* The barrier needs all NTHREADS: cannot continue. */
      fprintf(stderr, "pthread_create failed: %d\n", rc);
      exit(1);
    }
  }
  for (unsigned t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&barrier);
  printf("stress_many_threads checksum=%llu\n",
         (unsigned long long)__atomic_load_n(&total, __ATOMIC_RELAXED));
  return 0;
}
