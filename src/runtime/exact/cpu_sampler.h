// Exact mode's CPU-time sampler: where the program's threads spend their CPU time, so the report
// can say how much of it ran in code whymiss-cc did not instrument (whose memory accesses the
// simulator never sees). Facts only: the interrupted instruction, the thread, the time; the
// attribution to modules happens post-mortem (analysis/unseen.h).
//
// Every thread of the program (the initialising one at init, those of pthread_create from their
// start, others at their first recorded access) gets a POSIX timer on its own CPU clock
// (CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID) firing every Knobs::period_ns of that thread's CPU
// time with a real-time signal nobody uses (soft::pick_signal), reserved through
// common/signal_guard.h so the program's own requests for it are kept aside and still honoured.
// Timers are made with raw system calls (no librt, no allocation); they are not inherited by a
// forked child and vanish at exec, as the profile's scope does. Known gap: the thread CPU clock
// counts kernel time too, so a timer can expire inside an execve of the profiled process itself
// (not of a forked child); a kernel that still delivers the signal a timer queued before the
// exec deleted it would then end the new image with it (its default action). 600 self-execs
// under Linux 6.18 never saw it (not checked on older kernels); a task-clock perf event with exclude_kernel (soft/sampler.h)
// would close the gap where perf_event_open is allowed.
//
// Contracts: start() and thread_start() run outside signal handlers (init, attach_thread).
// The signal handler is async-signal-safe: it writes one record into a store mmap'ed at start
// (bounded: a full store drops and counts), touches no lock, preserves errno, and never unblocks
// anything (a thread that blocks the signal is simply not sampled meanwhile). If no signal or no
// timer is available, a note says so and the program runs on unsampled. export_sections() runs
// once, in finish() (possibly in a dying process's signal handler): no heap, no locks.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "runtime/common/profile_strings.h"

namespace whymiss::rt::cpu {

struct Knobs {
  uint64_t period_ns = 10 * 1000 * 1000;  // 10 ms of a thread's CPU time: ~100 samples/s/thread
  size_t max_samples = 1 << 18;           // 6 MiB of address space (MAP_NORESERVE)
  // Called on every sample, in the handler, on the sampled thread (the recording's progress,
  // model/progress.h): must be async-signal-safe.
  void (*tick)() = nullptr;
};

// Picks the signal, installs its handler and maps the store. `owner` is the recording process.
void start(pid_t owner, const Knobs& k = {});
// Arms the calling thread's timer (thread `index` of the profile); later calls in the same
// thread do nothing.
void thread_start(uint32_t index);

// Sections written by export_sections (CpuSampling, CpuSamples, Notes).
inline constexpr size_t kSections = 3;
// Stops sampling, waits (bounded) for handlers in flight, and fills up to kSections sections
// into `out` (their data stays valid for the life of the process). Returns how many.
size_t export_sections(profile::SectionData* out, StringTable& strings);

}  // namespace whymiss::rt::cpu
