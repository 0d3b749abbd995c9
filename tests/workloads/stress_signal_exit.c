/*
 * stress_signal_exit.c -- a program killed by a fatal signal with default
 * disposition (robustness test for the profiler, no cache problem, no
 * fixed twin).
 *
 * Does some memory work, prints its checksum line (flushed), restores the
 * default disposition of SIGTERM, unblocks it and raise()s it.  atexit
 * handlers and destructors do not run; a profiler must still produce a
 * valid profile of the work done so far.
 *
 * Usage: stress_signal_exit [scale]   (scale >= 1 multiplies the work)
 * Output: one checksum line; then killed by SIGTERM (shell status 143).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define WORDS 65536 /* 512 KiB */
#define PASSES_PER_SCALE 200

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

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  uint64_t *a = malloc(WORDS * sizeof *a);
  if (a == NULL) {
    fprintf(stderr, "malloc failed\n");
    return 1;
  }
  for (unsigned i = 0; i < WORDS; i++) a[i] = i * 3u;
  uint64_t sum = 0;
  for (long p = 0; p < passes; p++)
    for (unsigned i = 0; i < WORDS; i += 8) {
      a[i] ^= (uint64_t)p;
      sum += a[i];
    }
  printf("stress_signal_exit checksum=%llu\n", (unsigned long long)sum);
  fflush(stdout);

  signal(SIGTERM, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(SIGTERM);

  free(a);
  return 3; /* not reached */
}
