/* A library built with plain gcc (no whymiss-cc): its loop's memory accesses never reach whymiss's
 * simulator. unseen_main.c, built with whymiss-cc, spends nearly all its CPU time in it, so the
 * exact-mode report must say first that most of the program's time ran here, unseen. */
#include <stddef.h>

static unsigned char buf[1 << 20];

unsigned long unseen_hash(unsigned rounds) {
  unsigned long h = 1;
  for (unsigned r = 0; r < rounds; ++r)
    for (size_t i = 0; i < sizeof buf; i += 64) {
      buf[i] = (unsigned char)(buf[i] + h);
      h = h * 31 + buf[i];
    }
  return h;
}
