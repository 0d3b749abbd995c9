/*
 * control.c -- cache-friendly control program (no cache problem).
 *
 * Repeatedly sums a 16 KiB array, which stays in the 48 KiB L1 after the
 * first pass.  One element is changed after each pass so the compiler cannot
 * hoist the summation out of the pass loop.
 * Expected report: no significant problem (only the compulsory misses of the
 *   first pass; miss ratio far below any significance threshold).
 * There is no fixed twin: -DWHYMISS_FIXED builds the same program.
 *
 * Usage: control [scale]   (scale >= 1 multiplies the passes)
 * Output: one checksum line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N ((16u * 1024u) / sizeof(uint64_t))
#define PASSES_PER_SCALE 4000

static uint64_t data[N];

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

static uint64_t array_sum(void) {
  uint64_t s = 0;
  for (size_t i = 0; i < N; i++) s += data[i];
  return s;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  for (size_t i = 0; i < N; i++) data[i] = i * 2654435761u;

  uint64_t total = 0;
  for (long p = 0; p < passes; p++) {
    total += array_sum();
    data[(size_t)p % N] += (uint64_t)p;
  }
  printf("control checksum=%llu\n", (unsigned long long)total);
  return 0;
}
