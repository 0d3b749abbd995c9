/*
 * fs_field.c -- one hot, false-shared field among cold neighbours (known answer for the
 * `fields` view).
 *
 * struct worker is 32 bytes: `count` (8 bytes, hot), then `id` and `name` (cold: written once
 * by main before the threads start, never read in the loop). Two workers sit in one 64-byte
 * line (aligned_alloc(64, ...)). Thread t increments only workers[t].count, so every
 * increment's line was invalidated by the other thread writing the other `count`: false
 * sharing between the two `count` fields, and no miss on `id` or `name` after the start.
 *
 * Usage: fs_field [iterations per thread]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 2

struct worker {
  long count;
  long id;
  char name[16];
};

static struct worker *workers;
static long iters = 200000;
static pthread_barrier_t start_line;

static void *run(void *arg) {
  long t = (long)arg;
  volatile long *count = &workers[t].count;
  pthread_barrier_wait(&start_line);
  for (long i = 0; i < iters; ++i) *count += 1;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) iters = atol(argv[1]);
  struct worker *w = aligned_alloc(64, NTHREADS * sizeof *w);
  if (!w) return 1;
  for (int t = 0; t < NTHREADS; ++t) {
    w[t].count = 0;
    w[t].id = t;
    snprintf(w[t].name, sizeof w[t].name, "worker %d", t);
  }
  workers = w;
  pthread_barrier_init(&start_line, NULL, NTHREADS);
  pthread_t th[NTHREADS];
  for (long t = 0; t < NTHREADS; ++t) pthread_create(&th[t], NULL, run, (void *)t);
  for (int t = 0; t < NTHREADS; ++t) pthread_join(th[t], NULL);
  long sum = 0;
  for (int t = 0; t < NTHREADS; ++t) sum += w[t].count;
  printf("%ld\n", sum);
  free(w);
  return 0;
}
