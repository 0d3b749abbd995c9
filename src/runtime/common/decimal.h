// Decimal digits without stdio, for code that may run in a signal handler or must not reach a
// cancellation point (the runtimes' status lines, /proc paths, notes).
#pragma once
#include <cstddef>
#include <cstdint>

namespace whymiss::rt {

// Writes `v` in decimal at `out` (room for 20 characters, no terminator); returns the count.
inline size_t put_decimal(char* out, uint64_t v) noexcept {
  char d[20];
  size_t n = 0;
  do d[n++] = char('0' + v % 10);
  while ((v /= 10) != 0);
  for (size_t i = 0; i < n; ++i) out[i] = d[n - 1 - i];
  return n;
}

}  // namespace whymiss::rt
