// Full-trace windows of the soft collector: for a short window every running thread
// single-steps itself (the x86 trap flag) and records the address of every data access of every
// instruction *before* it runs, so the profile holds exact, in-order access streams of all
// threads, which analysis::estimate() replays through the simulator. Unlike breakpoints on a few
// hot instructions, a window sees every access that lands in a set and every line reused within
// it; unlike a sample, the address is read before the instruction can overwrite its registers.
// The trap flag works wherever the kernel single-steps (KVM and Firecracker guests alike); it
// needs no debug register and no PMU.
//
// How a window runs. The collector's tick opens an *epoch* when the trap-time budget allows; a
// thread joins it at its next task-clock sample (so only threads that are running join, and no
// blocked system call is interrupted): start_here() records the interrupted instruction and sets
// TF in the context the sample handler returns to. Each single-step SIGTRAP (TRAP_TRACE) then
// records the next instruction and keeps TF, until `steps` instructions were stepped. A window
// ends early, before the instruction runs, at anything that enters the kernel (syscall,
// sysenter, int: the kernel may block signals, and a cloned thread would inherit TF) or reads or
// restores the flags (pushf, popf, iret), at an undecodable instruction, when the store is full
// and when the run ends. Accesses of the runtime's own code and implicit stack slots (push,
// pop, call, ret: what the exact runtime does not see either) are stepped but not recorded.
//
// Runs. A single step costs a debug exception, which a hypervisor may intercept: ~11 us on our
// Zen 4 Firecracker guest, against ~2.4 us for an int3 (bench/step_cost.c). So at each trap
// the handler decodes ahead from the instruction about to run. Near direct jmp/jcc, call and
// ret it takes itself (sets rip; for call/ret rsp and the return slot, which is not recorded, as
// before). Straight-line code is recorded ahead, each instruction's accesses from the registers
// as they are, up to the first instruction whose addresses use a register an earlier one of the
// stretch writes (a pointer chase: the stretch ends there, the next starts with it), the next
// control transfer, or 48 instructions; that instruction gets a breakpoint (trace_patches.h:
// taken by the handler, or run out of line) and the stretch runs natively with TF clear. What
// is no plain fall-through (syscall, rep string, indirect jump) is single-stepped as before.
// Breakpoints stay while windows run stretches and go when none does (tick), when dlopen/dlclose
// changed the code, or at stop(); threads outside windows that meet one have it taken for them.
// Not in libc, the loader, the vDSO or the runtime's own libraries (their code runs with
// SIGTRAP blocked at times), and not while a thread blocks SIGTRAP (/proc/self/task/*/status,
// when an epoch opens and every 20 ms while breakpoints are in place). What differs from
// single-stepping: the
// accesses of a stretch are recorded (timestamped) before any of it runs; a thread that leaves
// its stretch (a program's handler, siglongjmp) ends its window at the next breakpoint it meets
// elsewhere, or at a sample 50 ms after its last trap.
//
// Division of labour with the soft runtime (soft/runtime.cpp): the runtime calls init() once,
// start_here() from its task-clock handler, tick() from its collector thread, stop() and the
// exports at the end, forget_after_fork() in a child. This module owns SIGTRAP: init() installs
// its handler only when SIGTRAP is at its default disposition (a program or debugger owning it
// makes init return EBUSY), and keeps it for the life of the process. A SIGTRAP that is not a
// step of a window gets the default action (restored, then raised again).
// Contracts: nothing allocates after init (mmap'ed tables); start_here() and the SIGTRAP handler
// are async-signal-safe, lock-free and preserve errno; tick() runs on one thread at a time.
#pragma once
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::soft::trace {

struct Config {
  // Instructions per thread and window. A window should touch more distinct lines than the L1
  // holds, so that the replay can tell a reuse the L1 keeps from one it cannot (see
  // target_lines: a window whose footprint keeps growing goes on). 20,000 steps are ~5,000-8,000
  // accesses in the loops we measured; with stretches of 5,000 steps, a loop nest whose new lines
  // come in bursts (a column group of a matrix product) still shows growth in every stretch.
  uint32_t steps = 20000;
  // A window that has not yet touched `target_lines` distinct cache lines (of 1 << line_shift
  // bytes) when its steps run out, and whose last stretch still touched new ones (1/64 of the
  // target), goes on, 1/4 of `steps` at a time, up to `max_steps`: the
  // replay can only tell a reuse the L1 keeps from one it cannot when the window reaches past
  // the L1's size (a loop nest whose lines come back only after its next outer iteration needs
  // ~100,000 steps). 0 = fixed-length windows. Counted with a 16 Ki-bit linear-counting sketch
  // per thread (about 2 % error at 1,500 lines).
  uint32_t target_lines = 0;
  uint32_t max_steps = 100000;
  uint32_t line_shift = 6;
  // Trap time per thread as a share of wall time (per mille). A single step costs ~7-18 us
  // here; with runs an instruction ~1 us, so 2 % buys windows 2-4 times as often as 5 % did
  // before runs, at less than half the time (bench/README.md, "Runs").
  uint32_t budget_permille = 20;
  // What one step is assumed to cost before any window measured it (then: the last windows').
  uint32_t step_cost_ns = 12000;
  // An epoch stays open this long, and after that while one of its windows is still being
  // stepped: a running thread takes a task-clock sample within one period, so every thread
  // running at the time joins.
  uint64_t epoch_ns = 30'000'000;
  // Once the budget allows, an epoch opens at a random tick, on average this long after the
  // previous one could have opened (a Poisson process): windows land anywhere in the run, not
  // always at its start. The first window's budget is granted at init, and the first epoch
  // opens at a random time between first_min_ns and first_max_ns after the first tick (so
  // every run longer than that gets one; a fixed time could always fall on the same phase).
  uint64_t mean_gap_ns = 150'000'000;
  uint64_t first_min_ns = 20'000'000, first_max_ns = 100'000'000;
  // The mutex hooks' native accounting periods: one collector tick in this many (see
  // LockMarks below); 1 = every tick outside epochs (WHYMISS_LOCK_PERIOD_TICKS, for tests
  // that must see the accounting path taken).
  uint32_t lock_period_ticks = 32;
  // Runs (see the top of this file): straight-line code runs natively between breakpoints
  // instead of being single-stepped. false: every instruction is single-stepped
  // (WHYMISS_TRACE_RUNS=0), as before runs.
  bool runs = true;
  uint32_t max_windows = 8192;
  // The accesses the store takes in all (40 bytes each: the record and its time); past them a
  // window ends (TraceEnd::Full).
  uint32_t max_accesses = 1u << 21;
  // A file the collector writes finished chunks of accesses to (read and write, e.g. an
  // O_TMPFILE beside the profile), so that only the chunks being filled stay in memory: without
  // one, every traced access stays in memory until exit. Closed by this module only in a forked
  // child (forget_after_fork). -1: none.
  int spill_fd = -1;
  uint64_t seed = 1;
  // SIGTRAPs that are not steps of a window: `forward` runs the program's disposition (the
  // runtime keeps the program's SIGTRAP requests aside, signal_guard.h); without it, the
  // default action. A TRAP_TRACE outside a window goes to `forward` only when `program_owns()`
  // (the program asked for SIGTRAP: it may step itself); otherwise it is a stray TF of ours.
  void (*forward)(int, siginfo_t*, void*) = nullptr;
  bool (*program_owns)() = nullptr;
  // The calling thread's index and segment bases (false: not a thread of the program's that
  // may step). A thread that meets a breakpoint of an open epoch it has not joined joins it
  // there, as start_here() from a sample: with runs a window lasts ~10-30 ms, and a thread
  // trapping on another's breakpoints took its next sample up to 13 ms late (measured). Null:
  // threads join from samples only. Async-signal-safe.
  bool (*identify)(uint32_t* thread_index, uint64_t* fs_base, uint64_t* gs_base) = nullptr;
};

// Heap object containing addr (serial, 0 if none); async-signal-safe.
using ObjectLookup = uint64_t (*)(uint64_t addr);

// Maps the tables and installs the SIGTRAP handler. `own_lo`, `own_hi`: the runtime's own code,
// whose accesses are not recorded. Returns 0, EBUSY (SIGTRAP is not at SIG_DFL), EINVAL (config),
// or the errno of a failed mmap/sigaction. The decoder (soft::init) must be set up first.
int init(const Config& c, ObjectLookup lookup, uint64_t own_lo, uint64_t own_hi);

// From the task-clock handler of thread `thread_index`: joins the open epoch if this thread has
// not yet, by recording the instruction at the context's rip and setting TF in `uc`. Returns
// true if a window started. Async-signal-safe.
bool start_here(ucontext_t* uc, uint32_t thread_index, uint64_t fs_base, uint64_t gs_base);
// Whether the calling thread is inside a window (its samples then measure the stepping).
bool tracing();
// From the task-clock handler: a thread inside a window whose interrupted context has no TF
// lost it (a handler of the program that left by siglongjmp or an exception: the kernel
// cleared TF for it and the saved one was never restored). Ends the window (TraceEnd::Lost).
// A window interrupted while a handler of the program runs ends too (its steps would resume
// after the handler: harmless strays).
void check_lost(ucontext_t* uc);

// Collector: accrues the budget and opens epochs.
void tick(uint64_t now_ns);
// No new windows; windows in progress end at their next step. Idempotent.
void stop();
// From the collector, when dlopen/dlclose changed the loaded code: every breakpoint goes (a
// library may have gone and another come to its pages); windows re-arm what they still need.
void modules_changing();
// In a forked child: never records (the parent's windows are the profile's).
void forget_after_fork();

// Results (after stop(); windows still stepping are exported as they are). export_windows
// takes a snapshot of the store that the calls after it export (so that each window's access
// count matches the accesses); without one, they take their own.
size_t window_count();
size_t access_count();
size_t export_windows(profile::TraceRecord* out, size_t max);
// Grouped by window, in program order within each; times (if not null, `max` entries) gets when
// each ran (CLOCK_MONOTONIC ns), in the same order. Ends the snapshot.
size_t export_accesses(profile::TraceAccessRecord* out, uint64_t* times, size_t max);
// The same records, and their times, streamed from the store and the spill file through put
// without a copy of them all (profile::SectionData::produce); the snapshot stays, so that each
// can run twice. False when a put failed or the spill file could not be read (errno).
size_t snapshot_accesses();
bool write_accesses(profile::PutBytes put, void* ctx);
bool write_times(profile::PutBytes put, void* ctx);

// pthread mutex hand-overs (soft/lock_hooks.cpp interposes the calls and reports here). A call
// is *accounted* only while its thread is stepping or during a native accounting period (the
// collector's tick opens one of Config::lock_period_ticks ticks, ~3 % of the run): outside them a hooked
// call costs a load of each flag and passes through, since a lock-heavy program makes tens of
// millions of calls a second. While accounted, the hooks keep the thread's marks current (the
// SIGTRAP handler copies them into each recorded access: profile::kTraceInLockCall,
// kTraceLockHeld) and call lock_releasing() just before libc releases a mutex the thread took:
// calls for one mutex are thus serialised by the mutex itself, and a fixed table of each mutex's
// last releaser in the current period tells whether this tenure followed another thread's (a
// hand-over). Counted as traced when the thread is stepping, else native. A window that opens
// inside a critical section sees it unmarked until its next lock call. Lock-free, allocation-
// free, no locked instruction on the common path (a thread's counters are its own; a table
// entry is written only when its releaser changes).
struct LockMarks {
  uint32_t held;     // mutexes the thread holds (taken while accounted); the SIGTRAP handler reads it
  uint32_t in_call;  // inside a lock or unlock call of libc; the SIGTRAP handler reads it
  uint32_t stepping;  // the thread is in a window (set by this module)
  // Which ones: an unlock of a mutex not listed (taken while not accounted, or by another
  // thread) changes nothing. Past kHeldSlots, `overflow` counts.
  static constexpr uint32_t kHeldSlots = 8;
  uint32_t listed, overflow;
  const void* mutexes[kHeldSlots];
};
extern __thread LockMarks t_lock_marks __attribute__((tls_model("initial-exec")));
// Nonzero (the period's number) while a native accounting period is open.
extern std::atomic<uint32_t> g_lock_period;
inline bool lock_accounted() {
  return t_lock_marks.stepping || g_lock_period.load(std::memory_order_relaxed) != 0;
}
void lock_releasing(const void* mutex);
// Sums of every thread's counts; false when no acquisition was seen.
bool export_locks(profile::LockInfoRecord* out);

struct Stats {
  uint64_t epochs = 0;
  uint64_t windows = 0;
  uint64_t accesses = 0;
  uint64_t dropped = 0;        // accesses not stored (store full)
  uint64_t stray_traps = 0;    // TRAP_TRACE outside a window (TF restored by a popf): cleared
  uint64_t step_cost_ns = 0;   // the current estimate of one step's cost (per instruction)
  uint64_t single_steps = 0;   // instructions single-stepped (trap flag)
  uint64_t run_traps = 0;      // stretches recorded ahead and run natively (one trap each) ...
  uint64_t run_steps = 0;      // ... and their instructions
  uint64_t breakpoints_armed = 0, breakpoints_refused = 0, breakpoint_strays = 0;
  uint64_t spilled = 0;        // accesses written to the spill file
  uint64_t spill_errno = 0;    // why spilling stopped (a failed write), 0 if it did not
};
Stats stats();

}  // namespace whymiss::soft::trace
