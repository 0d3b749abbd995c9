/*
 * conflict_alloc.c -- ALLOCATOR-induced conflict misses.
 *
 * Problem: 16 separate, equally sized heap objects of 256 KiB each.  glibc
 *   serves requests that large with mmap, so every object starts at the same
 *   offset within a 4 KiB page (page + 16 bytes), hence element i of every
 *   object maps to the SAME L1 set (64 sets x 64-byte lines: addresses 4 KiB
 *   apart share a set).  The program reads the objects in lockstep
 *   (for i: for k: sum += obj[k][i]) over a 2 KiB prefix of each, for many
 *   passes.  16 lines compete for each 12-way set, so every access misses,
 *   although the 16 x 2 KiB = 32 KiB working set would fit in the 48 KiB L1
 *   if the objects were spread over the sets.  (The mappings are 260 KiB
 *   apart, so in the 1 MiB, 1024-set L2 they spread out: an L1 phenomenon.)
 * Fix (-DWHYMISS_FIXED): stagger the objects' starting offsets: object k is
 *   used from byte k*256 of its allocation, so consecutive objects start 4
 *   sets apart and every set holds lines of only 8 of the 16 objects.  Same
 *   values, same summation order, same result.
 * Expected report for the buggy build: kind = conflict (misses concentrated
 *   on few L1 sets), origin = allocator (the conflicting lines belong to
 *   several distinct heap objects from allocation site `malloc` in
 *   alloc_objects(), all placed at the same page offset); hot instruction:
 *   the load of obj[k][i] in lockstep_sum().  The fixed build has almost no
 *   L1 misses after the first pass.
 *
 * If the buggy build does not see all objects at the same page offset (e.g.
 * a different allocator), a warning goes to stderr.
 *
 * Usage: conflict_alloc [scale]   (scale >= 1 multiplies the passes)
 * Output: one checksum line, identical for the buggy and the fixed build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOBJ 16
#define OBJ_BYTES (256u * 1024u)         /* > glibc mmap threshold (128 KiB) */
#define PREFIX_ELEMS (2048u / sizeof(double)) /* 2 KiB used per object */
#define PASSES_PER_SCALE 1000
#ifndef WHYMISS_FIXED
#define STAGGER 0u
#else
#define STAGGER 256u /* object k starts k*256 bytes (4 lines) into its block */
#endif

static char *raw[NOBJ];
static double *obj[NOBJ];

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

static void alloc_objects(void) {
  for (unsigned k = 0; k < NOBJ; k++) {
    raw[k] = malloc(OBJ_BYTES + k * STAGGER);
    if (raw[k] == NULL) {
      fprintf(stderr, "malloc failed\n");
      exit(1);
    }
    obj[k] = (double *)(raw[k] + k * STAGGER);
  }
}

static double lockstep_sum(void) {
  double sum = 0.0;
  for (unsigned i = 0; i < PREFIX_ELEMS; i++)
    for (unsigned k = 0; k < NOBJ; k++)
      sum += obj[k][i];
  return sum;
}

int main(int argc, char **argv) {
  long passes = PASSES_PER_SCALE * parse_scale(argc, argv);
  alloc_objects();

#ifndef WHYMISS_FIXED
  for (unsigned k = 1; k < NOBJ; k++) {
    if ((uintptr_t)obj[k] % 4096 != (uintptr_t)obj[0] % 4096) {
      fprintf(stderr, "conflict_alloc: warning: objects do not share a page offset (%p vs %p)\n",
              (void *)obj[0], (void *)obj[k]);
      break;
    }
  }
#endif

  /* Small integer values: every partial sum is exact in a double. */
  for (unsigned k = 0; k < NOBJ; k++)
    for (unsigned i = 0; i < PREFIX_ELEMS; i++)
      obj[k][i] = (double)((k * 131 + i * 17) % 512);

  double total = 0.0;
  for (long p = 0; p < passes; p++)
    total += lockstep_sum();

  for (unsigned k = 0; k < NOBJ; k++) free(raw[k]);
  printf("conflict_alloc checksum=%.0f\n", total);
  return 0;
}
