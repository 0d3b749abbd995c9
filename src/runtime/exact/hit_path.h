// The exact runtime's hit path, inlined into every __tsan_* access entry of libwhymiss-rt.so
// (tsan_abi.cpp is compiled with WHYMISS_EXACT_HIT_PATH there; the generic ABI library for test
// sinks is not). An access by an instruction with a cached record, to the line this thread
// touched last, held with enough rights, changes only counters and the line's granule mask
// (sim::HitMemo): no call, no errno, no allocation. Everything else goes to on_access.
//
// Contract: t_hit.memo is non-null only while the thread may use its core's memo directly (the
// process has this one recording thread and the relay does not run; runtime.cpp keeps it equal
// to ThreadState::memo for such a thread and null otherwise). Called with the ABI layer's
// re-entrancy flag set, so a signal handler's accesses never meet a half-done update here.
#pragma once
#include <cstdint>

#include "runtime/common/tables.h"
#include "sim/sim.h"

namespace whymiss::rt {

struct HitPath {
  sim::HitMemo* memo = nullptr;
  IpTable* ips = nullptr;
  uint64_t* accesses = nullptr;  // the thread's access count
};
extern constinit thread_local HitPath t_hit __attribute__((tls_model("initial-exec")));

// A hit on `memo` by the instruction before return address `ip`, if its record is cached: the
// memo's line and the instruction's and thread's access counts change, nothing else. False,
// having changed nothing, otherwise. For the thread that owns the memo only.
__attribute__((always_inline)) inline bool memo_hit(sim::HitMemo* memo, IpTable* ips,
                                                    uint64_t* accesses, uintptr_t ip,
                                                    uintptr_t addr, uint32_t size,
                                                    bool write) noexcept {
  profile::InstructionRecord* s = ips->find_hot(ip - 1);
  if (s == nullptr || !memo->try_hit(addr, size, write)) return false;
  ++*accesses;
  s->accesses[write]++;
  return true;
}

__attribute__((always_inline)) inline bool take_hit(uintptr_t ip, uintptr_t addr, uint32_t size,
                                                    bool write) noexcept {
  const HitPath& h = t_hit;
  return h.memo != nullptr && memo_hit(h.memo, h.ips, h.accesses, ip, addr, size, write);
}

}  // namespace whymiss::rt
