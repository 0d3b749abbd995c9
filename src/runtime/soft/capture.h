// The capture stage of the sampling collectors (soft, pmu): CachePerf's fine-grained sampling
// rebuilt on debug registers. Hot memory instructions (chosen from the task-clock or PMU
// samples) get an execution breakpoint (perf PERF_TYPE_BREAKPOINT, HW_BREAKPOINT_X) in every
// thread for a bounded window; each hit fires before the instruction runs, so the registers give
// its exact address. Lines sampled by two or more threads with a write among them get data
// watchpoints (HW_BREAKPOINT_RW, 8 bytes) in the threads, bounded in hits and time, to observe
// the cross-thread interleaving on the line. What it records becomes the profile's Windows and
// Captures sections (model/profile.h), which analysis::estimate() replays.
// (added) Where debug registers do not fire (Firecracker and other VMs), execution windows use
// software breakpoints instead: an int3 on the instruction, stepped over in place (Int3 backend,
// capture_int3.cpp; no watchpoints then). backend() tells which; docs/soft-capture.md.
//
// Division of labour with the runtime that owns the process (soft/runtime.cpp):
//  - the runtime owns the one real-time signal every perf event of whymiss delivers (F_SETSIG,
//    F_SETOWN_EX to the owning thread) and its handler; the handler offers each signal to
//    on_signal() first (si_fd tells the events apart);
//  - the runtime calls add_thread()/remove_thread() from its thread hooks, note_sample() from its
//    sampling path, tick() from its collector thread (all signals blocked there), and stop() and
//    the exports at the end.
// Contracts: init() is the only function that may fail to set up; afterwards nothing allocates
// from the heap (tables are mmap'ed at init), nothing takes a lock that a signal handler could
// need while its holder is interrupted, and every failure to open or arm an event is counted and
// skipped: the program runs on. on_signal() and note_sample() are async-signal-safe and
// lock-free; tick() is called by one thread at a time; errno is preserved by every entry point.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "model/profile.h"
#include "runtime/soft/decode.h"

namespace whymiss::soft::capture {

struct Config {
  int signo = 0;                      // the runtime's signal (F_SETSIG) for every event opened here
  uint32_t max_threads = 4096;        // threads tracked at once
  uint32_t slots = 4;                 // debug registers used per thread (x86-64 has 4)
  uint32_t captures_per_window = 256; // executions captured per window and thread, then disabled
  uint64_t window_ns = 20'000'000;    // a window expires after this long even if not full
  uint64_t min_samples = 4;           // an instruction needs this many samples to be armed
  uint32_t max_windows = 8192;        // windows recorded over the run (then no new ones)
  uint32_t max_captures = 1u << 20;   // capture records over the run (then dropped, counted)
  bool watchpoints = true;            // the sharing stage (data watchpoints on shared lines)
  // Pacing (added after the first version of this header): tick arms new windows only while the
  // estimated time spent in traps stays under budget_permille of wall time, counted per thread
  // (a window costs its busiest thread's hits x hit_cost_ns; ~10 us per hit measured here). The
  // budget accrues with time and holds at most one second's worth, so a quiet phase cannot save
  // up a burst. 20 per mille: the stage costs ~2% of run time at most.
  uint32_t budget_permille = 20;
  uint32_t hit_cost_ns = 10'000;
  uint64_t rearm_ns = 500'000'000;    // an instruction / word is not armed again sooner (rotation)
  uint64_t decay_ns = 100'000'000;    // sample counts of candidates are halved this often
  // (added) init checks that a debug-register watchpoint on this thread actually counts a write.
  // Some VMs (Firecracker guests here) accept breakpoint events but never trigger them; init
  // then returns ENODEV rather than arming windows that stay empty. Tests that emulate traps
  // turn it off.
  bool probe = true;
  // (added) Software breakpoints (CaptureBackend::Int3) where the probe finds debug registers
  // dead: the window's instruction gets an int3 on its first byte instead of a debug register;
  // each hit is stepped over in place (two SIGTRAPs: the int3, then the single step). Slots
  // then only bound the windows open at once. No watchpoints with this backend: the sharing
  // stage is off and sharing comes from samples. force_int3 picks it without probing (tests,
  // or where debug registers are wanted by someone else).
  bool allow_int3 = true;
  bool force_int3 = false;
  // What an int3 hit costs the trapped thread (two signals, two code writes, the record):
  // replaces hit_cost_ns for the pacing when the backend is Int3. Measured on this VM
  // (SoftCaptureInt3.CostPerHit, 2 shared cores): 25-31 us per hit at load ~3.5, 34-41 us at
  // load ~8 (preemption inflates it); the two traps alone are 7.5-11 us each. Charged on every
  // hit of the window's busiest tracked thread, past captures_per_window included (the int3
  // is everyone's: those hits trap too).
  uint32_t int3_hit_cost_ns = 30'000;
};

// Looks up the heap object containing addr (serial, 0 if none); async-signal-safe.
using ObjectLookup = uint64_t (*)(uint64_t addr);

// Maps the tables. Returns 0 or an errno value (then the stage stays off; the runtime notes it):
// EINVAL for a config out of range, ENODEV when the probe saw breakpoints accepted but never
// firing, or the errno with which the probe's perf_event_open was refused (EACCES, ENOENT...).
// (added) When the probe fails and allow_int3 is set (or force_int3), the Int3 backend is used
// instead and init returns 0, unless SIGTRAP is not at its default disposition (the program or
// a debugger owns it): then EBUSY, counted in Stats::sigtrap_owned, and the stage stays off.
// SIGTRAP division of labour: with the Int3 backend this stage installs its own SIGTRAP handler
// at init (kept for the life of the process, so late and inherited traps are always handled);
// the runtime must not install, block or forward anything for SIGTRAP and calls nothing here for
// it. Traps that are not the stage's get the default action (the handler restores SIG_DFL and
// lets the trap happen again).
// The decoder (soft::init) must be set up first: arming checks instructions against its module
// table (ips in no mapped code are rejected, Stats::rejected) and traps are decoded with it.
// Design, pacing defaults and measured costs: docs/soft-capture.md.
int init(const Config& c, ObjectLookup lookup);

// Thread tracking. add_thread from the thread itself at its start (after the runtime gave it an
// index); remove_thread from the thread itself when it exits (closes its events).
int add_thread(pid_t tid, uint32_t thread_index);
void remove_thread(pid_t tid);

// The sampling path reports each kept sample (ip, addr, size, flags, thread); feeds the choice of
// hot instructions and of shared lines. Async-signal-safe, lock-free, bounded memory.
void note_sample(const profile::SampleRecord& s);

// One scheduling step at time now_ns (CLOCK_MONOTONIC): ends expired or full windows, closes
// their events, and arms new windows on the hottest instructions / shared lines not recently
// captured. Called every few milliseconds from the runtime's collector thread.
void tick(uint64_t now_ns);

// Offered every signal of the runtime's signal number. Returns true when si->si_fd is one of
// this stage's events (the capture was recorded or dropped and counted); false otherwise (not
// ours: the runtime handles it). `regs` is the interrupted thread's register view; `thread_index`
// the runtime's index of the calling thread.
bool on_signal(const siginfo_t* si, const RegisterView& regs, uint32_t thread_index);

// Disarms everything and stops arming (end of the run, possibly with threads still running).
// With Int3, restores every patched byte and page protection before returning.
void stop();
// In a forked child: forgets the parent's events without touching them (closes the fds only).
// With Int3 it also restores the code bytes the child inherited patched (the SIGTRAP handler
// does so too on a child's first hit, so a child whose runtime never calls this is safe).
void forget_after_fork();

// (added) Int3 only: while a window is armed, the first byte of its instruction in memory is
// 0xCC (or, for a moment, the original while a thread steps over it). Code that reads
// instructions from memory (the sampling path's decode_previous) sees the int3: a sample whose
// preceding instruction is the patched one decodes as NotMemory. This gives the original bytes
// of a currently patched ip (returns their count, 0 if ip is not patched); async-signal-safe.
// (The stage walks the function's boundaries into the decoder's cache before patching, so the
// cache itself is never built from patched bytes.)
size_t original_code(uint64_t ip, uint8_t* out, size_t max);

// (added) The backend in use since the last successful init: None (no init, or init failed),
// HwBreakpoint or Int3. The runtime writes it into MetaRecord::capture_backend.
profile::CaptureBackend backend();

// Results, after stop(). Windows in the order they were armed; captures grouped by thread in
// time order per thread (CaptureRecord::window indexes the exported windows).
size_t window_count();
size_t capture_count();
size_t export_windows(profile::WindowRecord* out, size_t max);
size_t export_captures(profile::CaptureRecord* out, size_t max);

struct Stats {
  uint64_t windows = 0;          // windows armed
  uint64_t watch_windows = 0;    // of which on shared lines (reason 1)
  uint64_t captures = 0;         // captures recorded
  uint64_t dropped = 0;          // traps not stored (table full, undecodable, not memory)
  uint64_t open_failures = 0;    // perf_event_open / fcntl / ioctl refusals
  int first_errno = 0;           // errno of the first refusal (for the report's note)
  uint64_t rejected = 0;         // (added) candidates not armed: ip in no mapped code segment
                                 // (Int3: also undecodable, not a memory access, pushf/popf,
                                 // in libc / the loader / the runtime: see capture_int3.cpp)
  // (added) Int3 backend. watch_windows stays 0 (no software watchpoints: sharing from samples).
  uint64_t sigtrap_owned = 0;    // inits refused because SIGTRAP was not ours to take (EBUSY);
                                 // counted even though the stage then stays off
  uint64_t int3_passed = 0;      // hits stepped over without a record: untracked threads,
                                 // threads past captures_per_window, the window's hit limit
  uint64_t int3_bounces = 0;     // a stepping thread met an int3 re-inserted by another: retried
  uint64_t int3_stale = 0;       // traps of an int3 removed since (re-executed, not recorded)
  uint64_t sigtrap_blocked = 0;  // windows not armed: a thread had SIGTRAP blocked (the kernel
                                 // would kill it at the int3)
  uint64_t sigtrap_taken = 0;    // the program installed its own SIGTRAP handler after init:
                                 // every window was ended at that tick and the stage stopped
};
Stats stats();

}  // namespace whymiss::soft::capture
