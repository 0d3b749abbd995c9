/*
 * two_types.c -- two data types, one with capacity misses and one with conflict misses (known
 * answer for the `types` and `fields` views; run with L1=32K:8:64, 64 sets).
 *
 * Phase 1: struct record is 64 bytes (a line); 4096 records (256 KiB, 8 x L1) are swept
 *   ROUNDS1 times reading only `key`: every read misses L1 for want of capacity (the sweep
 *   does not fit), ~4096 misses a round, all on `key`; `payload` is never read (cold).
 * Phase 2: struct cell is 4096 bytes; 16 cells (aligned to 4096) put their `v` fields 4096
 *   bytes apart, all in one L1 set: 16 lines in an 8-way set miss every time although 16 lines
 *   fit a 32 KiB cache: conflict misses, 16 a round, ROUNDS2 rounds -- fewer than phase 1's.
 * So `types` ranks struct record first (capacity) and struct cell second (conflict).
 *
 * Usage: two_types
 */
#include <stdio.h>
#include <stdlib.h>

#define NRECORDS 4096
#define ROUNDS1 12
#define NCELLS 16
#define ROUNDS2 1000

struct record {
  long key;
  long payload[7];
};

struct cell {
  long v;
  char pad[4088];
};

int main(void) {
  struct record *records = malloc(NRECORDS * sizeof *records);
  struct cell *cells = aligned_alloc(4096, NCELLS * sizeof *cells);
  if (!records || !cells) return 1;
  for (long i = 0; i < NRECORDS; ++i) {
    records[i].key = i;
    for (int j = 0; j < 7; ++j) records[i].payload[j] = i + j;
  }
  for (int i = 0; i < NCELLS; ++i) cells[i].v = i;
  long sum = 0;
  for (int r = 0; r < ROUNDS1; ++r)
    for (long i = 0; i < NRECORDS; ++i) sum += ((volatile struct record *)records)[i].key;
  for (int r = 0; r < ROUNDS2; ++r)
    for (int i = 0; i < NCELLS; ++i) sum += ((volatile struct cell *)cells)[i].v;
  printf("%ld\n", sum);
  free(records);
  free(cells);
  return 0;
}
