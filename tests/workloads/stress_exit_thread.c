/*
 * stress_exit_thread.c -- exit(0) called from a non-main thread while other
 * threads are still running (robustness test for the profiler, no cache
 * problem, no fixed twin).
 *
 * The main thread starts two "spinner" threads that loop forever over
 * private memory, and one "exiter" thread that does a fixed amount of work,
 * prints the checksum line and calls exit(0).  Meanwhile the main thread is
 * blocked in pthread_join() on the exiter, which never returns.  exit() runs
 * atexit handlers and library destructors while the spinners keep accessing
 * memory; the profiler must finish its profile safely in that situation.
 *
 * Usage: stress_exit_thread [scale]   (scale >= 1 multiplies the work)
 * Output: one checksum line; exit status 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NSPINNERS 2
#define WORDS 8192 /* 64 KiB */
#define PASSES_PER_SCALE 200

static long passes;
static volatile uint64_t spin_sink[NSPINNERS * 8]; /* one line per spinner */

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

static void *spinner(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t *buf = malloc(WORDS * sizeof *buf);
  if (buf == NULL) return NULL;
  for (unsigned i = 0; i < WORDS; i++) buf[i] = i + id;
  for (uint64_t p = 0;; p++) { /* until the process exits */
    uint64_t s = 0;
    for (unsigned i = 0; i < WORDS; i++) {
      buf[i] += p;
      s += buf[i];
    }
    spin_sink[id * 8] = s;
  }
  return NULL;
}

static void *exiter(void *arg) {
  (void)arg;
  uint64_t *buf = malloc(WORDS * sizeof *buf);
  if (buf == NULL) {
    fprintf(stderr, "malloc failed\n");
    exit(1);
  }
  for (unsigned i = 0; i < WORDS; i++) buf[i] = i * 7u;
  uint64_t s = 0;
  for (long p = 0; p < passes; p++)
    for (unsigned i = 0; i < WORDS; i++) {
      buf[i] = buf[i] * 3u + (uint64_t)p;
      s += buf[i] >> 5;
    }
  printf("stress_exit_thread checksum=%llu\n", (unsigned long long)s);
  exit(0); /* from a non-main thread, with the spinners still running */
}

int main(int argc, char **argv) {
  passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  pthread_t sp[NSPINNERS], ex;
  for (unsigned t = 0; t < NSPINNERS; t++) {
    if (pthread_create(&sp[t], NULL, spinner, (void *)(uintptr_t)t) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  if (pthread_create(&ex, NULL, exiter, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    return 1;
  }
  pthread_join(ex, NULL); /* never returns: the exiter calls exit(0) */
  fprintf(stderr, "stress_exit_thread: exiter returned\n");
  return 1;
}
