// Internals shared by the heap subsystem's translation units (alloc_hooks, private_heap, sites,
// object_store). Not part of the runtime core's contract (that is heap.h); tests may use it.
//
// Everything here is async-signal-tolerant in the sense of ARCHITECTURE.md: no stdio, no
// allocation from the program's heap, and every lock is a spinlock whose holder is recorded in a
// per-thread flag so a signal handler re-entering on the same thread backs off instead of
// deadlocking.
#pragma once
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/common/heap.h"

namespace whymiss::rt {

// Minimal test-and-test-and-set lock of the heap code. (Not named SpinLock: common/spinlock.h has
// one of another layout in the same namespace, and two would break the one-definition rule.)
// Zero-initialised = unlocked, so it is usable before any constructor has run (the hooks are
// called from other libraries' constructors).
class HeapLock {
 public:
  bool try_lock() noexcept {
    return v_.load(std::memory_order_relaxed) == 0 &&
           v_.exchange(1, std::memory_order_acquire) == 0;
  }
  void lock() noexcept {
    for (unsigned spins = 0; !try_lock(); ++spins) {
      if (spins < 128) {
        __builtin_ia32_pause();
      } else {
        sched_yield();  // the holder may have been preempted; a plain syscall, signal-safe
      }
    }
  }
  void unlock() noexcept { v_.store(0, std::memory_order_release); }
  void reset() noexcept { v_.store(0, std::memory_order_relaxed); }  // after fork, in the child

 private:
  std::atomic<uint32_t> v_{0};
};

struct HeapSlot;  // a HeapObject plus bookkeeping (object_store.cpp)

// Per-thread state of the heap subsystem. Plain POD in initial-exec TLS: one %fs-relative access,
// no __tls_get_addr (which may itself call malloc), no constructor, no destructor.
struct ThreadHeapState {
  uint8_t guard;  // inside store/site bookkeeping: nested hooks go to the private heap, unrecorded
  uint8_t holding;  // inside a private-heap critical section: nested private_alloc returns nullptr
  uint8_t stack_state;               // 0 = bounds unknown, 1 = stack_lo/stack_hi known
  uint8_t stack_reads;               // /proc/self/maps reads done for this thread (bounded)
  uint8_t fork_locked;               // this thread holds the private heap's locks across fork()
  uintptr_t stack_lo, stack_hi;      // readable range holding this thread's frames
  uint64_t serial_next, serial_end;  // this thread's block of object serials
  HeapSlot* slot_cache;              // free object records cached by this thread (object_store.cpp)
  uint32_t slot_cached;
  uint32_t stripe;      // home stripe of the record pool
  uint8_t cache_state;  // 0 = not set up, 1 = caching, 2 = not caching (exiting, no key)
};
extern __thread ThreadHeapState t_heap __attribute__((tls_model("initial-exec")));

// RAII for ThreadHeapState::guard; signal fences keep the compiler from moving the flag across
// the guarded code (a signal handler on this thread must see it).
class HeapGuard {
 public:
  HeapGuard() noexcept : saved_(t_heap.guard) {
    t_heap.guard = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~HeapGuard() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_heap.guard = saved_;
  }
  HeapGuard(const HeapGuard&) = delete;
  HeapGuard& operator=(const HeapGuard&) = delete;

 private:
  uint8_t saved_;
};

// ---- private heap extras (private_heap.cpp) ----
// `align` is a power of two; any value up to 1 MiB costs nothing extra for sizes up to 1 MiB
// (size classes are naturally aligned). nullptr when exhausted or re-entered.
void* private_alloc_aligned(size_t size, size_t align) noexcept;
// private_alloc with the block's bytes zero (calloc), without writing a big block's pages.
void* private_alloc_zeroed(size_t size) noexcept;
void* private_realloc(void* p, size_t size) noexcept;  // p must be private (or nullptr)
size_t private_usable_size(const void* p) noexcept;    // p must be private
// Bytes of address space reserved for the private region (0 before first use); for tests.
size_t private_region_size() noexcept;
void private_heap_before_fork() noexcept;
// The lock of the DTV shadow table (alloc_hooks.cpp) across fork().
void dtv_before_fork() noexcept;
void dtv_after_fork_parent() noexcept;
void dtv_after_fork_child() noexcept;
void private_heap_after_fork_parent() noexcept;
void private_heap_after_fork_child() noexcept;

// Anonymous, zero-filled, MAP_NORESERVE memory for the runtime's large fixed tables (never passed
// to free). nullptr on failure. Preserves errno.
void* reserve_zeroed(size_t bytes) noexcept;

// ---- allocation sites (sites.cpp) ----
// Fills frames[0..n) with the allocating code's return addresses, innermost first: frames[0] =
// `ret` (the hook's __builtin_return_address(0)), then the frame-pointer chain starting at `fp`
// (the hook's __builtin_frame_address(0)). Never faults: only reads inside this thread's stack.
int capture_frames(uintptr_t ret, uintptr_t fp, uint64_t* frames, int max) noexcept;
// Interns a stack; equal stacks get equal indices. profile::kNoSite when the table is full.
uint32_t intern_site(const uint64_t* frames, int depth) noexcept;
inline uint32_t capture_site(uintptr_t ret, uintptr_t fp) noexcept {
  uint64_t frames[profile::kSiteFrames];
  const int depth = capture_frames(ret, fp, frames, profile::kSiteFrames);
  return intern_site(frames, depth);
}
uint64_t dropped_sites() noexcept;  // stacks not interned because the table was full
void sites_after_fork_child() noexcept;

// ---- object store (object_store.cpp) ----
// Registers [start, start+size). size 0 is not registered. Counts dropped_objects() on failure.
void store_register(uintptr_t start, size_t size, uint32_t thread, uint32_t site) noexcept;
// Removes the live object starting exactly at `start` from the index and returns it (no lookup
// can reach it afterwards, and no with_object callback on it is still running), or nullptr.
HeapSlot* store_detach(uintptr_t start) noexcept;
// Disposes of a detached object: kept as "retired" when it has misses, else recycled.
void store_release(HeapSlot* slot) noexcept;
// Puts a detached object back (realloc failed and the old block is still the program's).
void store_reattach(HeapSlot* slot) noexcept;
// True once anything was registered and the store is not disabled (forked child): frees must
// then unregister. A relaxed load.
bool store_active() noexcept;
void store_after_fork_child() noexcept;

// Misses of a HeapObject that count for retention/export: every kind but index 0 (sim::Outcome
// Hit; see profile::kKinds).
inline bool has_misses(const HeapObject& o) noexcept {
  uint64_t sum = 0;
  for (int k = 1; k < profile::kKinds; ++k) sum += __atomic_load_n(&o.misses[k], __ATOMIC_RELAXED);
  return sum != 0;
}

}  // namespace whymiss::rt
