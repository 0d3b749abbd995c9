// The coarse sampling pieces of the soft runtime that can be tested on their own: choosing the
// runtime's signal, opening a per-thread task-clock event that signals its own thread, the
// sentence for a refused perf_event_open, and the fixed-size sample store.
//
// Contracts: pick_signal, open_task_clock and refusal_message are called outside signal
// handlers (init, thread start). SampleStore::append is async-signal-safe and lock-free (one
// atomic add per chunk claim); it never blocks and never allocates: when the store is full the
// sample is refused and the caller counts it.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::soft {

// First real-time signal in [lo, hi] whose disposition is SIG_DFL and that no one has blocked
// in the calling thread's mask, so that neither the program nor another library is using it.
// Returns 0 when there is none. The default range starts at SIGRTMIN+8, leaving the low ones
// that libraries (e.g. POSIX timers of glibc-based code, old LinuxThreads users) often take.
int pick_signal(int lo, int hi);
int pick_signal();

// Opens a task-clock software event on thread `tid` of this process counting user time only,
// overflowing every `period_ns` nanoseconds of that thread's CPU time; each overflow sends
// `signo` to that thread (O_ASYNC, F_SETSIG, F_SETOWN_EX F_OWNER_TID), with si_fd = the event's
// fd and si_code = POLL_IN. The fd is close-on-exec. Returns the fd, or -errno.
int open_task_clock(pid_t tid, uint64_t period_ns, int signo);

// One sentence (no newline) naming why perf_event_open was refused and how to allow it, for
// stderr and the profile's notes. `paranoid` is /proc/sys/kernel/perf_event_paranoid (or
// INT32_MIN when unreadable). Writes at most n-1 bytes plus NUL; returns the length.
size_t refusal_message(int err, int paranoid, char* out, size_t n);
int read_perf_paranoid();  // INT32_MIN when unreadable

// Fixed-size storage of SampleRecords, mmap'ed once at init (MAP_NORESERVE: untouched pages cost
// nothing). Threads claim chunks of kChunk records; each chunk has one writer (its thread, from
// its signal handler) so appends need no lock. The reader (export) runs at the end, after the
// writers stopped or were waited for.
class SampleStore {
 public:
  static constexpr uint32_t kChunk = 512;
  struct Cursor {  // per thread; zero-initialised = no chunk yet
    uint32_t chunk = 0;   // chunk index + 1
    uint32_t used = 0;    // records written into it
  };

  // Room for `max_records` (rounded up to whole chunks). Returns 0 or an errno value.
  int init(size_t max_records);
  // Appends; false when no chunk can be claimed (store full): the caller counts the sample as
  // DiscardReason::BufferFull.
  bool append(Cursor& c, const profile::SampleRecord& r);
  // Records stored so far (all chunks, in chunk order).
  size_t count() const;
  // Copies up to `max` records into out, sorted by time; returns how many were copied.
  size_t export_sorted(profile::SampleRecord* out, size_t max) const;
  // Unmaps (tests; the runtime keeps its store for the life of the process).
  void release();
  // In a forked child: the records belong to the parent's profile; drop them.
  void forget() { claimed_.store(0, std::memory_order_relaxed); }

 private:
  profile::SampleRecord* recs_ = nullptr;
  std::atomic<uint32_t>* used_ = nullptr;  // per chunk, release-stored after each record
  uint32_t chunks_ = 0;
  size_t bytes_ = 0;
  std::atomic<uint32_t> claimed_{0};
};

}  // namespace whymiss::soft
