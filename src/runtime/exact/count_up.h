// A counter one access path bumps on every miss or eviction.
#pragma once
#include <atomic>
#include <cstdint>

namespace whymiss::rt {

// Adds 1 to `c` and returns the new value. `serialised`: no other thread counts meanwhile (one
// thread, or the relay simulating for all), so a plain load and store do, without the locked
// instruction an atomic add costs on every call.
inline uint64_t count_up(std::atomic<uint64_t>& c, bool serialised) noexcept {
  if (!serialised) return c.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t n = c.load(std::memory_order_relaxed) + 1;
  c.store(n, std::memory_order_relaxed);
  return n;
}

}  // namespace whymiss::rt
