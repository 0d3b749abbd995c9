// The allocator side of the runtime, shared by every collector: interposition of the program's
// allocation functions, the object store (CachePerf §3.4), allocation call sites, and a private
// heap for the runtime's own allocations so they never land between the program's objects.
//
// Threading: every function here may be called from any thread concurrently. Lookups
// (find_object / objects_overlapping) take only short internal spinlocks and never allocate.
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt {

// ---- provided by the runtime core (runtime.cpp), used by the heap code ----
// Index of the calling thread (0 = first thread seen); assigns one on first use.
uint32_t current_thread_index() noexcept;
// True while the calling thread is inside the runtime (its own allocations must not be
// recorded as the program's, and must come from the private heap).
bool in_runtime() noexcept;
// True when the runtime is recording (initialised, not disabled, not a forked child).
bool recording() noexcept;
// Called before a block of the program's stops being the object it was (free, realloc): the
// core settles whatever it still owes the calling thread's past accesses to it. May wait.
void heap_detach_fence() noexcept;

// ---- the private heap: malloc for the runtime's own data, in its own mmap'ed region ----
void* private_alloc(size_t size) noexcept;  // 16-byte aligned; nullptr when exhausted
void private_free(void* p) noexcept;
bool is_private(const void* p) noexcept;

// ---- heap objects ----
struct HeapObject {
  uint64_t serial;
  uintptr_t start;
  uint64_t size;
  uint32_t alloc_thread;
  uint32_t site;  // index into the site table, or profile::kNoSite
  // Statistics the runtime core updates through with_object(); zero at allocation.
  uint64_t misses[profile::kKinds];
  uint64_t thread_mask;
  uint64_t l1_set_mask;
  uint64_t self_conflicts;  // see profile::ObjectRecord::self_conflicts
  // Data flow (exact/dataflow.h): the last holder, (thread index + 1) | kFlowWriteBit when it
  // came by a write (0 = untouched since allocation), and the flow-table slot + 1 of the
  // handover that made it the holder (0 = none: that handover was dropped).
  uint32_t flow_last;
  uint32_t flow_edge;
};
inline constexpr uint32_t kFlowWriteBit = 1u << 31;

// Calls fn(HeapObject&) for the live heap object containing `addr`, holding that object's
// lock; returns false when no live object contains it. fn must not allocate or block.
bool with_object(uintptr_t addr, void (*fn)(HeapObject&, void*), void* arg) noexcept;
// Changes whenever a live object stops being live (free, the old block of a realloc, ...). A
// caller that serialises all heap activity with its own use (the exact runtime while the process
// has one thread) may keep the HeapObject& its with_object callback saw, and update it without
// the lock, for as long as this value has not changed.
uint64_t object_detaches() noexcept;
// Changes whenever an object becomes live (after it can be found). page_without_objects(addr):
// no live object overlaps addr's 4 KiB page; a caller may remember that for as long as
// object_attaches() returns what it returned before the call.
uint64_t object_attaches() noexcept;
bool page_without_objects(uintptr_t addr) noexcept;
// Copies up to `max` live objects overlapping [lo, hi) into out; returns how many were found
// (may exceed max; only max are copied).
int objects_overlapping(uintptr_t lo, uintptr_t hi, HeapObject* out, int max) noexcept;

// Appends ObjectRecords for every object (live, or freed while having misses) whose misses are
// non-zero, and the SiteRecords, into caller-provided arrays (from private_alloc). Returns counts.
// Called once at the end, with the program's other threads possibly still running.
size_t export_objects(profile::ObjectRecord* out, size_t max) noexcept;
size_t export_sites(profile::SiteRecord* out, size_t max) noexcept;
size_t object_count_with_misses() noexcept;  // upper bound for sizing export_objects' array
size_t site_count() noexcept;
uint64_t dropped_objects() noexcept;  // objects the store could not keep (table full)

// Called from the runtime's pthread_atfork child handler: the child drops all recording state
// it does not own (locks re-initialised).
void heap_after_fork_child() noexcept;
// (added) pthread_atfork prepare / parent handlers: hold the private heap's locks across fork()
// so the child never inherits a free list another thread was half-way through updating. Call
// heap_before_fork last in the runtime's prepare handler (after the runtime's own locks) and
// heap_after_fork_parent / heap_after_fork_child first in the parent / child handlers.
void heap_before_fork() noexcept;
void heap_after_fork_parent() noexcept;

}  // namespace whymiss::rt
