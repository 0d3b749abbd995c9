/* A one-line `static inline` accessor (like MEM_read64, XXH_read64, LZ4_read32) called from the
 * hot loop of another function. Built with -O2 -g, the accessor is inlined, so its load's debug
 * line is the accessor's; the report must give the caller's line, with the accessor beside it
 * (check_inline.py). The markers name the lines the check looks for. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BYTES (4u << 20) /* beyond L1 and L2: every pass misses on every line */
#define PASSES 4

static inline uint64_t read64(const unsigned char *p) {
  return *(const uint64_t *)(const void *)p; /* HELPER_LINE */
}

__attribute__((noinline)) static uint64_t sum_lines(const unsigned char *buf, size_t n) {
  uint64_t s = 0;
  for (int pass = 0; pass < PASSES; pass++)
    for (size_t i = 0; i + 8 <= n; i += 64) s += read64(buf + i); /* CALLER_LINE */
  return s;
}

int main(void) {
  unsigned char *buf = malloc(BYTES);
  if (!buf) return 1;
  for (size_t i = 0; i < BYTES; i += 64) buf[i] = (unsigned char)i;
  printf("%llu\n", (unsigned long long)sum_lines(buf, BYTES));
  free(buf);
  return 0;
}
