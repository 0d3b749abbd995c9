/* bench/exact_memory.c -- the program bench/exact_memory.py profiles: N threads (argument,
 * 1..256) each write and read 256 KiB of their own heap 8 times, then exit. Small footprint on
 * purpose: what the table shows is exact mode's own memory (simulator, tables, rings), not the
 * program's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WORDS (256 * 1024 / 8)

static void *worker(void *arg) {
  uint64_t *buf = malloc(WORDS * sizeof *buf);
  uint64_t sum = (uintptr_t)arg;
  if (buf == NULL) return NULL;
  for (int rep = 0; rep < 8; ++rep)
    for (unsigned i = 0; i < WORDS; ++i) sum += (buf[i] = sum + i);
  free(buf);
  return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  if (n < 1 || n > 256) {
    fprintf(stderr, "usage: %s THREADS (1..256)\n", argv[0]);
    return 2;
  }
  pthread_t th[256];
  uint64_t total = 0;
  for (int i = 1; i < n; ++i) pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
  total += (uintptr_t)worker(NULL);  /* the main thread is one of the N */
  for (int i = 1; i < n; ++i) {
    void *r;
    pthread_join(th[i], &r);
    total += (uintptr_t)r;
  }
  printf("%llu\n", (unsigned long long)total);
  return 0;
}
