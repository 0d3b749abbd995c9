// A simulated core's inbox (docs/parallel-sim.md, section 2, rule 3): what other cores' accesses
// did to this core's copies (an invalidation, a downgrade, a back-invalidation), posted by the
// thread that simulated them while it held the line's shard lock, and applied by the core's
// owner to its own arrays at the start of its next slow-path access. So no thread writes
// another core's private state, and a hit on a private line needs no lock.
//
// Many posters, one consumer. A poster never waits (it holds a shard lock the owner may be
// waiting for): a full inbox drops the message and counts it (callers size the ring so that it
// cannot fill: dropped() stays 0 in the tests). Allocates only in the constructor.
#pragma once
#include <sched.h>

#include <atomic>
#include <cstdint>

#include "sim/zeroed.h"

namespace whymiss::sim {

struct Message {
  enum Kind : uint8_t { Invalidate = 1, Downgrade = 2, BackInvalidate = 3 };
  uint64_t line = 0;
  uint64_t writer_mask = 0;  // Invalidate: the granules the writer's access touched
  uint32_t writer_core = 0;  // Invalidate: the writer
  Kind kind = Invalidate;
  uint8_t inclusion_kind = 0;  // BackInvalidate: the Outcome of the shared level's eviction
};

class Inbox {
 public:
  // Room for at least `capacity` messages (rounded up to a power of two). Throws std::bad_alloc.
  explicit Inbox(uint64_t capacity) {
    cap_ = 16;
    while (cap_ < capacity) cap_ <<= 1;
    slots_ = make_zeroed<Slot>(cap_);
  }
  uint64_t capacity() const { return cap_; }

  // Any thread. Returns false, having counted a drop, when the ring is full. Publishes the
  // message before bumping `pending` (the consumer's cheap "anything to drain?" word), so a
  // consumer that sees pending != 0 finds the message, unless an earlier poster is still
  // between its reservation and its publication (then it finds it on a later drain).
  bool post(const Message& m, std::atomic<uint32_t>& pending) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    do {
      // Signed: `t` may be stale, behind a head that the consumer moved past it meanwhile (the
      // exchange below then fails and reloads it); unsigned, that wrapped and read as full.
      if (int64_t(t - head_.load(std::memory_order_acquire)) >= int64_t(cap_)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!tail_.compare_exchange_weak(t, t + 1, std::memory_order_relaxed));
    Slot& s = slots_[t & (cap_ - 1)];
    s.m = m;
    __atomic_store_n(&s.seq, t + 1, __ATOMIC_RELEASE);
    pending.fetch_add(1, std::memory_order_release);
    return true;
  }

  // The consumer only: applies the published messages in order, then takes them off `pending`.
  // Returns how many it applied.
  template <typename F>
  uint32_t drain(std::atomic<uint32_t>& pending, F&& apply) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    uint32_t n = 0;
    for (;; ++h, ++n) {
      Slot& s = slots_[h & (cap_ - 1)];
      if (__atomic_load_n(&s.seq, __ATOMIC_ACQUIRE) != h + 1) break;
      apply(static_cast<const Message&>(s.m));
    }
    head_.store(h, std::memory_order_release);
    if (n) pending.fetch_sub(n, std::memory_order_relaxed);
    return n;
  }

  // drain(), but through every message reserved before the call, waiting for a poster between
  // its reservation and its publication (which never waits itself, so this ends) instead of
  // stopping there: a caller holding a lock that posters about some line take (a shared-level
  // part) then has every message about that line posted before it took the lock, which drain()
  // does not promise when a poster of another line, under another lock, reserved a slot earlier.
  template <typename F>
  uint32_t drain_through(std::atomic<uint32_t>& pending, F&& apply) {
    const uint64_t t = tail_.load(std::memory_order_acquire);
    uint64_t h = head_.load(std::memory_order_relaxed);
    uint32_t n = 0;
    for (; h != t; ++h, ++n) {
      Slot& s = slots_[h & (cap_ - 1)];
      for (unsigned spins = 0; __atomic_load_n(&s.seq, __ATOMIC_ACQUIRE) != h + 1;)
        if (++spins < 128) __builtin_ia32_pause(); else sched_yield();
      apply(static_cast<const Message&>(s.m));
    }
    head_.store(h, std::memory_order_release);
    // (A message counts in `pending` once published: those applied here were, by now, or are
    // about to be; the subtraction may run ahead of a poster's add for a moment, never below
    // what is still unapplied once every add has happened.)
    if (n) pending.fetch_sub(n, std::memory_order_relaxed);
    return n;
  }
  // Whether a message was reserved and not yet applied (published or not).
  bool any() const {
    return tail_.load(std::memory_order_acquire) != head_.load(std::memory_order_relaxed);
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    uint64_t seq;  // t + 1 once message t is in m (zero: nothing yet); atomic accesses only
    Message m;
  };
  static_assert(sizeof(Slot) == 32);
  uint64_t cap_ = 0;
  ZeroedArray<Slot> slots_;
  alignas(64) std::atomic<uint64_t> tail_{0};  // posters
  alignas(64) std::atomic<uint64_t> head_{0};  // the consumer
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace whymiss::sim
