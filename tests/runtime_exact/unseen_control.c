/* The control of unseen_main.c: the same shape of work, all of it in code built with whymiss-cc
 * (arithmetic on locals, which TSan does not instrument, so the program's own code, not whymiss's
 * runtime, takes the time). The report must not warn about uninstrumented code. */
#include <stdio.h>

static unsigned long results[16];

static unsigned long mix(unsigned long n) {
  unsigned long x = n | 1;
  for (unsigned long i = 0; i < 10000000; ++i) {  /* ~15 ms of arithmetic per call */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

int main(void) {
  for (unsigned i = 0; i < 25; ++i) results[i % 16] += mix(i);
  unsigned long sum = 0;
  for (unsigned i = 0; i < 16; ++i) sum += results[i];
  printf("%lu\n", sum);
  return 0;
}
