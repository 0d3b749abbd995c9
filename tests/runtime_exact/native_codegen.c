// Idioms whose code whymiss-cc must leave as GCC generates it natively (issue 18, item 4), and
// copies it must keep visible to exact mode. native_codegen.py compares the library calls of each
// function in a plain `cc -O2` object and a whymiss-cc object.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// malloc + memset(0): natively one calloc call.
double* zeroed(size_t n) {
  double* a = malloc(n * sizeof *a);
  if (a) memset(a, 0, n * sizeof *a);
  return a;
}

// The unaligned-load idiom: natively an 8-byte load, no call.
uint64_t load64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

// The same for a store and for memmove.
void store32(unsigned char* p, uint32_t v) { memmove(p, &v, sizeof v); }

// Copies and fills of constant size that GCC would expand inline, unreported: they stay calls.
void copy64(char* d, const char* s) { memcpy(d, s, 64); }
void clear1k(char* d) { memset(d, 0, 1024); }
// Of variable size: a call natively and under whymiss.
void copy_n(char* d, const char* s, size_t n) { memcpy(d, s, n); }
// malloc + memset(0) of a constant size beyond 8 KiB (natively a libcall, so calloc).
double* zeroed_4m(void) {
  double* a = malloc(1 << 22);
  if (a) memset(a, 0, 1 << 22);
  return a;
}
// malloc + a zeroing loop: natively loop distribution makes it a memset and the string pass a
// calloc. Under whymiss-cc only when GCC instruments after both (the plugin, gcc_tsan_late.cc).
double* zeroed_by_loop(size_t n) {
  double* a = malloc(n * sizeof *a);
  if (a == NULL) return NULL;
  for (size_t i = 0; i < n; i++) a[i] = 0.0;
  return a;
}
