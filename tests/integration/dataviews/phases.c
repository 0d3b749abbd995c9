// Known answer for `report --view working-set`: phase 1 works on a 16 KiB buffer (it fits in
// any L1 of 32 KiB), phase 2 sweeps a 1 MiB array twice. With L1 32K / L2 256K / L3 2M (64-byte
// lines) the array's resident lines rise during phase 2, up to the capacity of L1 (512 lines)
// and L2 (4,096) and, since it fits, to all of its 16,384 lines in L3; the small buffer, left
// alone in phase 2, is swept out of L1 and L2 but stays in L3. The two are of different types,
// so the view's groups (by type, when the debug information names it) keep them apart.
#include <stdio.h>
#include <stdlib.h>

enum { kSmall = 16 << 10, kBig = 1 << 20, kLine = 64 };
struct scratch { unsigned char b[kLine]; };
struct row { unsigned char b[kLine]; };

int main(void) {
  struct scratch* small = malloc(kSmall);
  struct row* big = malloc(kBig);
  if (!small || !big) return 1;
  long sum = 0;
  for (int pass = 0; pass < 64; ++pass)  // phase 1
    for (int i = 0; i < kSmall / kLine; ++i) small[i].b[0] = (unsigned char)(small[i].b[0] + pass + i);
  for (int pass = 0; pass < 2; ++pass)  // phase 2
    for (int i = 0; i < kBig / kLine; ++i) big[i].b[0] = (unsigned char)(big[i].b[0] + pass + i);
  sum = small[0].b[0] + big[kBig / kLine - 1].b[0];
  printf("%ld\n", sum);
  return 0;
}
