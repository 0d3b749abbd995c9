/* Built with whymiss-cc and linked with libunseen_lib.so (plain gcc): over 90 % of its CPU time is
 * in the library's loop, whose accesses exact mode cannot simulate. check_unseen.py checks that the
 * report names the library and its share of the time first. Its own accesses (results[]) are few. */
#include <stdio.h>

unsigned long unseen_hash(unsigned rounds);

static unsigned long results[16];

int main(void) {
  for (unsigned i = 0; i < 40; ++i) results[i % 16] += unseen_hash(1000);  /* ~0.5 s of CPU natively */
  unsigned long sum = 0;
  for (unsigned i = 0; i < 16; ++i) sum += results[i];
  printf("%lu\n", sum);
  return 0;
}
