// Known answer for the `sets` view (tests/integration/sets_check.py), run with a 32 KiB, 8-way,
// 64-byte-line L1 (64 sets). A global matrix of 64 rows is walked by column over its first 16
// doubles (two lines a row), many times. Rows of ROW_BYTES = 4096 bytes (a multiple of 64 sets x
// 64 bytes) put a column's 64 lines in one set: 64 lines cycling through 8 ways miss every time
// (conflict after the first pass: the 128 lines touched fit the cache), and every miss falls on
// set 0 or set 1 with no other miss between two misses on the same set (re-conflict distance 0,
// but at the two set changes of a pass). Built with -DPADDED, a row is one line longer (4160
// bytes): row r's lines fall on sets r and r + 1 (mod 64), the 128 lines spread two to a set and
// stay cached after the first pass; the second line of row r misses 62 misses after the first
// line of row r + 1 did on the same set (distance 62, long). The matrix is never written (zeros),
// so that walk() takes every miss; not static, so that the compiler cannot know its values.
#include <stdio.h>

#ifdef PADDED
#define ROW_BYTES (4096 + 64)
#else
#define ROW_BYTES 4096
#endif
#define ROWS 64
#define COLS 16      // doubles walked per row: two 64-byte lines
#define PASSES 200

double m[ROWS][ROW_BYTES / sizeof(double)] __attribute__((aligned(4096)));

__attribute__((noipa)) double walk(void) {
  double sum = 0;
  for (int c = 0; c < COLS; ++c)
    for (int r = 0; r < ROWS; ++r) sum += m[r][c];
  return sum;
}

int main(void) {
  double total = 0;
  for (int p = 0; p < PASSES; ++p) total += walk();
  printf("%.0f\n", total);
  return 0;
}
