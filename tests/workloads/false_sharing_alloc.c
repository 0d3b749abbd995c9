/*
 * false_sharing_alloc.c -- ALLOCATOR-induced false sharing (the Hoard
 * "cache-scratch" pattern), arranged for glibc malloc.
 *
 * Problem: the main thread mallocs a few small (16-byte) objects; glibc
 *   places them 32 bytes apart, so two of them lie in the same 64-byte line.
 *   The program picks such a pair and hands one object to each of two
 *   threads.  Each thread frees the object it was handed and immediately
 *   mallocs one of the same size: glibc's per-thread tcache returns the chunk
 *   just freed, so each thread now owns an object IT allocated, and the two
 *   threads' objects share one cache line.  Each thread then writes its own
 *   object many times (volatile: one load + one store per iteration).
 * Fix (-DWHYMISS_FIXED): the threads allocate their object with
 *   aligned_alloc(64, 64), so each object occupies a cache line of its own.
 * Expected report for the buggy build: kind = false sharing (coherence
 *   misses on one heap line written by two threads at different offsets),
 *   origin = allocator (the line holds objects allocated by different
 *   threads, at call site `malloc(OBJ_SIZE)` in worker()); hot instruction:
 *   the increment in worker().  The fixed build must show no significant
 *   coherence misses.
 *
 * If the expected layout is not obtained (e.g. a different allocator is in
 * use), a warning goes to stderr; stdout always carries one checksum line.
 *
 * Usage: false_sharing_alloc [scale]  (scale >= 1 multiplies the iterations)
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
#define OBJ_SIZE 16 /* glibc: 32-byte chunks, user pointers 16-byte aligned */
#define NCAND 8     /* objects the main thread allocates to find a pair */
#define LINE 64
#define ITERS_PER_SCALE 1000000UL /* writes per thread at scale 1 */

static unsigned long iters;
static void *handed[NTHREADS];          /* object handed to each thread */
static volatile long *owned[NTHREADS];  /* object each thread allocated */

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

static uintptr_t line_of(const volatile void *p) { return (uintptr_t)p / LINE; }

static void *worker(void *arg) {
  size_t t = (size_t)(uintptr_t)arg;
  free(handed[t]);
#ifndef WHYMISS_FIXED
  volatile long *obj = malloc(OBJ_SIZE); /* tcache hands back the chunk just freed */
#else
  volatile long *obj = aligned_alloc(LINE, LINE); /* a line of its own */
#endif
  pthread_barrier_wait(&start_line);
  if (obj == NULL) {
    fprintf(stderr, "allocation failed\n");
    exit(1);
  }
  obj[0] = 0;
  owned[t] = obj;
  for (unsigned long i = 0; i < iters; i++)
    obj[0]++;
  return NULL;
}

int main(int argc, char **argv) {
  iters = ITERS_PER_SCALE * (unsigned long)parse_scale(argc, argv);

  /* Allocate candidates; pick two that lie entirely within one cache line. */
  char *cand[NCAND];
  for (int i = 0; i < NCAND; i++) {
    cand[i] = malloc(OBJ_SIZE);
    if (cand[i] == NULL) {
      fprintf(stderr, "malloc failed\n");
      return 1;
    }
  }
  int a = -1, b = -1;
  for (int i = 0; i < NCAND && a < 0; i++) {
    for (int j = i + 1; j < NCAND; j++) {
      if (line_of(cand[i]) == line_of(cand[i] + OBJ_SIZE - 1) &&
          line_of(cand[j]) == line_of(cand[j] + OBJ_SIZE - 1) &&
          line_of(cand[i]) == line_of(cand[j])) {
        a = i;
        b = j;
        break;
      }
    }
  }
  if (a < 0) {
    fprintf(stderr, "false_sharing_alloc: warning: no two small objects share a cache line\n");
    a = 0;
    b = 1;
  }
  handed[0] = cand[a];
  handed[1] = cand[b];
  cand[a] = cand[b] = NULL; /* ownership passes to the threads */

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
    sum += owned[t][0];
  }

  int same_line = line_of(owned[0]) == line_of(owned[1]);
#ifndef WHYMISS_FIXED
  if (!same_line)
    fprintf(stderr, "false_sharing_alloc: warning: re-allocated objects %p and %p do not share a line\n",
            (void *)owned[0], (void *)owned[1]);
#else
  if (same_line)
    fprintf(stderr, "false_sharing_alloc: warning: aligned objects %p and %p share a line\n",
            (void *)owned[0], (void *)owned[1]);
#endif

  for (size_t t = 0; t < NTHREADS; t++) free((void *)owned[t]);
  for (int i = 0; i < NCAND; i++) free(cand[i]);
  printf("false_sharing_alloc checksum=%ld\n", sum);
  return 0;
}
