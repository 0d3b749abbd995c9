/* copy_loop: memset then memcpy over two 1 MiB heap buffers, 4 times. Exact mode sees the
 * copies as 64-byte pieces, each spanning both halves of its line: at 32-byte lines every piece
 * is two accesses, and a 2 MiB footprint (1 MiB at 32-byte lines missing on every access) is
 * what the half-line miss-ratio curve must show (tests/integration/mrc_check.py --half all). */
#include <stdlib.h>
#include <string.h>

int main(void) {
  const size_t n = (size_t)1 << 20;
  char *a = malloc(n), *b = malloc(n);
  if (!a || !b) return 2;
  for (int r = 0; r < 4; r++) {
    memset(a, r, n);
    memcpy(b, a, n);
  }
  return (a[5] + b[7]) == 6 ? 0 : 1;
}
