// The exact runtime's hit path, inlined into every __tsan_* access entry of libwhymiss-rt.so
// (tsan_abi.cpp is compiled with WHYMISS_EXACT_HIT_PATH there; the generic ABI library for test
// sinks is not). An access by an instruction with a cached record, to the line this thread
// touched last, held with enough rights, changes only counters and the line's granule mask
// (sim::HitMemo): no call, no errno, no allocation. Everything else goes to on_access.
//
// In a multi-threaded program (the relay runs, one simulated core per thread) a thread takes
// such a "held hit" itself only while the relay has simulated everything any thread pushed
// (relay::quiet(), its own ring drained), and only one that changes no simulator state
// (HitMemo::holds): a line it holds, words it already touched in this tenure, a write only to a
// line already modified. It then takes effect when it happens, after every queued access, as on a
// core that owns the line; everything else still goes through the relay, in its interleaving.
// Waiting for quiet keeps causality: an access another thread made before this one (say, the
// write behind a flag this thread just read) is never simulated after it.
//
// In parallel mode (the default; docs/parallel-sim.md) the relay idles: each thread owns its
// simulated core, which the simulator keeps lock-free (sim::Knobs::parallel),
// and takes memo hits itself as a single-threaded program does, with `busy` up around each so that
// finish() can wait for it (parallel_hit), except every so many accesses, when its pacing looks at
// the other threads (runtime.cpp, pace).
//
// Contract: t_hit.memo is non-null only while the thread may use its core's memo directly: the
// process has this one recording thread and the relay does not run (runtime.cpp keeps it equal
// to ThreadState::memo for such a thread and null otherwise), or `lane` is set and the thread is
// the only one on its core, or (parallel) `busy` is set without `lane` and the thread is the only
// one on its core. Called with the ABI layer's re-entrancy flag set, so a signal
// handler's accesses never meet a half-done update here.
#pragma once
#include <atomic>
#include <cstdint>

#include "runtime/common/tables.h"
#include "runtime/exact/access_log.h"
#include "runtime/exact/access_sink.h"
#include "runtime/exact/relay.h"
#include "runtime/exact/reuse.h"
#include "sim/sim.h"

namespace whymiss::rt {

struct HitPath {
  sim::HitMemo* memo = nullptr;
  IpTable* ips = nullptr;
  uint64_t* accesses = nullptr;  // the thread's access count
  relay::Lane* lane = nullptr;   // set: multi-threaded, held hits only (see above)
  // With `lane`: the thread's flag that finish() waits on (ThreadState::busy), up while a held
  // hit is under way, so that no count changes after the profile's export has read it.
  std::atomic<uint8_t>* busy = nullptr;
  // Accesses to push before the next wait for quiet, and how many to skip after the next wait
  // that does not pay off: a thread that keeps waiting in vain waits less and less often. A wait
  // pays off if quiet comes and the next access is then a held hit. It does not if another thread
  // keeps the relay busy, or contends for the line: the wait then only let the other thread run
  // alone, turning access-by-access contention into turns.
  uint32_t skip = 0, backoff = 0;
  bool waited = false;  // quiet came in a wait; the next held attempt says whether it paid off
  uint32_t thread = 0;  // the thread's index (for the access log)
  // Parallel: once the thread's access count reaches this, its next access goes to on_access,
  // whose pacing looks at the other threads (runtime.cpp, pace) and moves it on.
  const uint64_t* pace_at = nullptr;
};
// A thread that has pushed waits for quiet (and then takes held hits again) only once the relay
// found this many of its accesses in a row to be hits on one line: such a thread would push
// every access for good otherwise, as the relay never catches up with one that only pushes.
constexpr uint32_t kHitRunWorthWaiting = 32;
constexpr uint32_t kMaxWaitBackoff = 1u << 16;
extern constinit thread_local HitPath t_hit __attribute__((tls_model("initial-exec")));
// Whether threads with a lane may take held hits: cleared when recording ends (finish, fork), as
// other threads' t_hit cannot be reached then.
extern std::atomic<bool> g_held_hits;

// A hit on `memo` by the instruction before return address `ip`, if its record is cached: the
// memo's line and the instruction's and thread's access counts change, nothing else. False,
// having changed nothing, otherwise. For the thread that owns the memo only. `alone`: the
// process has this one recording thread and no relay (see alog::append).
__attribute__((always_inline)) inline bool memo_hit(sim::HitMemo* memo, IpTable* ips,
                                                    uint64_t* accesses, uintptr_t ip,
                                                    uintptr_t addr, uint32_t size,
                                                    bool write, uint32_t thread,
                                                    bool alone) noexcept {
  profile::InstructionRecord* s = ips->find_hot(ip - 1);
  if (s == nullptr || !memo->try_hit(addr, size, write)) return false;
  alog::append(addr, size, write, thread, alone);
  reuse::on_hit(addr, size);  // the half-line curve: another half of the line is a reuse there
  ++*accesses;
  s->accesses[write]++;
  return true;
}

inline void back_off(HitPath& h) noexcept {
  h.waited = false;
  h.backoff = h.backoff == 0 ? 1 : h.backoff < kMaxWaitBackoff ? 2 * h.backoff : kMaxWaitBackoff;
  h.skip = h.backoff;
}

// A held hit (see above) by a thread that feeds the relay through `h.lane`. The relay (or a solo
// owner) may invalidate the line while this runs: holds() then either saw the line before that
// (the hit comes first) or fails.
inline bool held_hit(HitPath& h, uintptr_t ip, uintptr_t addr, uint32_t size, bool write) noexcept {
  relay::Lane* lane = h.lane;
  if (!relay::quiet() || (!lane->ring->drained() && !lane->ring->look())) {
    if (h.skip != 0) {
      --h.skip;
      return false;
    }
    if (lane->hit_run.load(std::memory_order_relaxed) < kHitRunWorthWaiting ||
        !relay::await_quiet(lane)) {
      back_off(h);
      return false;
    }
    h.waited = true;
  }
  // Recording is over: leave `busy` alone (a thread that runs on after the export must not keep
  // raising it; finish() reads it as "stuck mid-access").
  if (!g_held_hits.load(std::memory_order_relaxed)) return false;
  profile::InstructionRecord* s = h.ips->find_hot(ip - 1);
  // finish() clears g_held_hits, then a membarrier, then waits for `busy` to drop: either this
  // load comes after that barrier and sees false, or finish() sees the flag up and waits.
  h.busy->store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const bool held = s != nullptr && g_held_hits.load(std::memory_order_relaxed) &&
                    h.memo->holds(addr, size, write);
  if (held) {
    h.memo->bump(write);
    alog::append(addr, size, write, h.thread);
    ++*h.accesses;
    s->accesses[write]++;
  }
  h.busy->store(0, std::memory_order_release);
  if (!held) {
    if (h.waited) back_off(h);
    return false;
  }
  if (h.waited) {
    h.waited = false;
    h.backoff = 0;
  }
  relay::store_if_changed(lane->local, uint8_t{1});
  return true;
}

// A memo hit by a thread of the parallel mode (see above; `busy` set, no `lane`): as memo_hit,
// but with `busy` up and only while g_held_hits says recording goes on (finish() clears it, then
// a membarrier, then waits for `busy`, as for held hits). The hit path's half-line curve is not
// fed (on_hit is for one thread; as for held hits, the curves of several threads are one merged
// stream, approximate anyway).
inline bool parallel_hit(HitPath& h, uintptr_t ip, uintptr_t addr, uint32_t size, bool write) noexcept {
  if (!g_held_hits.load(std::memory_order_relaxed) || *h.accesses >= *h.pace_at) return false;
  h.busy->store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  bool hit = false;
  // (h.lane set: a signal handler's access before `busy` went up moved the thread onto the relay,
  // which feeds its core from now on.)
  if (g_held_hits.load(std::memory_order_relaxed) && h.lane == nullptr) {
    profile::InstructionRecord* s = h.ips->find_hot(ip - 1);
    if (s != nullptr && h.memo->try_hit(addr, size, write)) {
      alog::append_own(addr, size, write, h.thread);
      ++*h.accesses;
      s->accesses[write]++;
      hit = true;
    }
  }
  h.busy->store(0, std::memory_order_release);
  return hit;
}

__attribute__((noinline)) inline void parallel_or_access(HitPath& h, uintptr_t ip, uintptr_t addr,
                                                         uint32_t size, bool write) noexcept {
  if (!parallel_hit(h, ip, addr, size, write)) on_access(ip, addr, size, write);
}

// held_hit, else on_access: one call that needs nothing afterwards, so that the entry that
// makes it keeps no more registers across it than for on_access alone (single-threaded hits
// paid three more saves and restores per access when ip and addr had to outlive a call here).
__attribute__((noinline)) inline void held_or_access(HitPath& h, uintptr_t ip, uintptr_t addr,
                                                     uint32_t size, bool write) noexcept {
  if (!held_hit(h, ip, addr, size, write)) on_access(ip, addr, size, write);
}

// True when the access was dealt with: a hit taken, or (multi-threaded) handed on.
__attribute__((always_inline)) inline bool take_hit(uintptr_t ip, uintptr_t addr, uint32_t size,
                                                    bool write) noexcept {
  HitPath& h = t_hit;
  if (h.memo == nullptr) return false;
  if (__builtin_expect(h.lane != nullptr, 0)) {
    held_or_access(h, ip, addr, size, write);
    return true;
  }
  if (__builtin_expect(h.busy != nullptr, 0)) {
    parallel_or_access(h, ip, addr, size, write);
    return true;
  }
  return memo_hit(h.memo, h.ips, h.accesses, ip, addr, size, write, h.thread, true);
}

}  // namespace whymiss::rt
