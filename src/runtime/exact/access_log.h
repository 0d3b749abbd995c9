// Exact mode's access log (profile::AccessLogRecord): every access the simulator takes, hits on
// the inline hit paths included, packed into 8 bytes, in about the order the simulator takes
// them (hits a thread counts itself while the relay runs are appended from that thread, so the
// order is approximate), for the what-if replays of analysis/predict.h (a fix applied to addresses, re-simulated at report
// time, without re-running the program).
//
// Bound: a fixed array reserved at start (WHYMISS_ACCESS_LOG entries, default 2^22 = 32 MiB,
// MAP_NORESERVE: pages are only committed as the log fills); 0 turns it off. When it is full,
// later accesses are not kept (the profile's total says how many there were): a replay then
// covers the run's first accesses, and says so. Appending is one relaxed fetch_add and a store;
// once full, one relaxed load (an unlocked xadd instead of the locked add where the caller is
// the only thread). No allocation, no lock, never blocks: safe on every access path.
#pragma once
#include <atomic>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt::alog {

struct Log {
  uint64_t* entries = nullptr;
  uint64_t capacity = 0;  // 0: off
  std::atomic<uint64_t> next{0};
};
extern constinit Log g_log;

// Reserves the log (`entries` entries). False when memory could not be had (the log stays off).
bool start(uint64_t entries) noexcept;

// `serialised`: no other thread appends meanwhile (the process has one recording thread and no
// relay), so the slot is taken without a locked add (which also waits for every store before
// it, per access): an unlocked xadd, one instruction, so that a signal handler of the same
// thread that appends (instrumented code in it) takes the next slot and not this one. (A load
// and a store were two: a handler between them got the same slot, and one entry was lost.)
__attribute__((always_inline)) inline void append(uint64_t addr, uint32_t size, bool write,
                                                  uint32_t thread, bool serialised = false) noexcept {
  Log& l = g_log;
  const uint64_t next = l.next.load(std::memory_order_relaxed);
  if (next >= l.capacity) return;  // off, or full
  uint64_t i = 1;
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                std::atomic<uint64_t>::is_always_lock_free);
  if (serialised)
    asm volatile("xaddq %0, %1" : "+r"(i), "+m"(*reinterpret_cast<uint64_t*>(&l.next)));
  else i = l.next.fetch_add(1, std::memory_order_relaxed);
  if (i < l.capacity) l.entries[i] = profile::access_log_pack(addr, size, write, thread);
}

// The entries kept so far (call once recording stopped).
inline uint64_t kept() noexcept {
  const uint64_t n = g_log.next.load(std::memory_order_acquire);
  return n < g_log.capacity ? n : g_log.capacity;
}

}  // namespace whymiss::rt::alog
