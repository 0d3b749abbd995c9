/* Two heap objects at the same address, one after the other: object A is allocated, scanned
 * until it misses, freed; object B is then allocated (glibc hands back A's chunk) and scanned the
 * same way. Each object must be charged its own misses, never the other's. Prints the two
 * start addresses. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BYTES (64 * 1024) /* above the 48 KiB L1, below glibc's mmap threshold */
#define PASSES 4

static uint64_t scan(volatile uint64_t *p) {
  uint64_t sum = 0;
  for (int pass = 0; pass < PASSES; pass++)
    for (size_t i = 0; i < BYTES / sizeof(uint64_t); i += 8) sum += p[i]++;
  return sum;
}

__attribute__((noinline)) static uint64_t *alloc_a(void) { return malloc(BYTES); }
__attribute__((noinline)) static uint64_t *alloc_b(void) { return malloc(BYTES); }

int main(void) {
  uint64_t *a = alloc_a();
  if (!a) return 1;
  uint64_t sum = scan(a);
  uintptr_t a_start = (uintptr_t)a;
  free(a);
  uint64_t *b = alloc_b();
  if (!b) return 1;
  sum += scan(b);
  printf("%lx %lx %lu\n", (unsigned long)a_start, (unsigned long)(uintptr_t)b, (unsigned long)sum);
  free(b);
  return 0;
}
