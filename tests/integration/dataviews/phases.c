// Known answer for `report --view working-set`: phase 1 works on a 16 KiB buffer (it fits in
// any L1 of 32 KiB), phase 2 sweeps a 1 MiB array twice. With L1 32K / L2 256K / L3 2M (64-byte
// lines) the array's resident lines rise during phase 2, up to the capacity of L1 (512 lines)
// and L2 (4,096) and, since it fits, to all of its 16,384 lines in L3; the small buffer, left
// alone in phase 2, is swept out of L1 and L2 but stays in L3.
#include <stdio.h>
#include <stdlib.h>

enum { kSmall = 16 << 10, kBig = 1 << 20, kLine = 64 };

int main(void) {
  unsigned char* small = malloc(kSmall);
  unsigned char* big = malloc(kBig);
  if (!small || !big) return 1;
  long sum = 0;
  for (int pass = 0; pass < 64; ++pass)  // phase 1
    for (int i = 0; i < kSmall; i += kLine) small[i] = (unsigned char)(small[i] + pass + i);
  for (int pass = 0; pass < 2; ++pass)  // phase 2
    for (int i = 0; i < kBig; i += kLine) big[i] = (unsigned char)(big[i] + pass + i);
  sum = small[0] + big[kBig - kLine];
  printf("%ld\n", sum);
  return 0;
}
