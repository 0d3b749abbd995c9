/*
 * random_lookup.c -- capacity misses of random indexing (hashing).
 * A 1 MiB table of integers (more than any L1) is read at hashed indices: each lookup is a
 * data-independent but irregular line, and the table holds no pointers. Expected: capacity at
 * L1, pattern "random"; fix: shrink the entries, partition by key, or batch and prefetch.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ENTRIES (1u << 17)

int main(int argc, char **argv) {
  const long scale = argc > 1 ? atol(argv[1]) : 1; /* optional scale */
  uint64_t *table = malloc(sizeof(uint64_t) * ENTRIES);
  if (!table) return 1;
  for (uint32_t i = 0; i < ENTRIES; i++) table[i] = i * 3u;
  uint64_t sum = 0, x = 0x9E3779B97F4A7C15ull;
  for (long k = 0; k < 6L * ENTRIES / 8 * scale; k++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sum += table[x & (ENTRIES - 1)];
  }
  printf("random_lookup %llu\n", (unsigned long long)sum);
  free(table);
  return 0;
}
