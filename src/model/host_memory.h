// How much memory this process may still take, for sizing decisions made before allocating
// (the simulator's memory budget, sim::Knobs::memory_budget).
#pragma once
#include <cstdint>

namespace whymiss {

// The smallest of: the machine's MemAvailable (/proc/meminfo), and the room left under this
// process' RLIMIT_AS (the limit minus its current address space, /proc/self/statm). At least 1
// when anything is known; 0 when nothing is (no /proc, no limit). Reads with plain system calls
// into stack buffers: no heap, no stdio, errno preserved, so the injected runtimes may call it.
uint64_t host_memory_available();

// What the cache simulator may take (sim::Knobs::memory_budget): three quarters of
// host_memory_available(), leaving room for what grows with the footprint (first-touch sets,
// the runtime's tables, the program itself) and for the rest of the machine; 0 = no limit known.
inline uint64_t simulator_memory_budget() {
  const uint64_t a = host_memory_available();
  return a == 0 ? 0 : a - a / 4;
}

}  // namespace whymiss
