// Where the capture tests' traps come from.
//
// On a machine whose debug registers work, the kernel delivers them: nothing to do. Some VMs
// (this project's Firecracker guests among them, kernel 6.18) accept PERF_TYPE_BREAKPOINT
// events but never trigger them: the count stays 0 and gdb's hardware watchpoints never fire
// either. There the tests run the code under test single-stepped (TF) and a SIGTRAP handler
// plays the kernel's part for the events the stage armed, read from its tables: an execution
// breakpoint "hits" when the thread is about to run the window's instruction, a watchpoint when
// the instruction that just ran accessed the watched word (its operands decoded with decode_at
// at the previous step, before it ran), and each event stops after captures_per_window hits
// like PERF_EVENT_IOC_REFRESH. A hit raises nothing: it calls the runtime's handler with the
// siginfo the kernel would have queued (POLL_IN, si_fd of the event) and the trap's context.
// Everything after the hit (on_signal, decoding, buffers, windows, export) is the real path.
#pragma once
#include <signal.h>

#include <functional>

namespace whymiss::soft::test {

// Probes once whether a hardware watchpoint on this thread counts a write.
bool hw_breakpoints_fire();

// Sets up the emulation (if needed): `deliver` is the runtime's handler for `signo`.
void init_traps(void (*deliver)(int, siginfo_t*, void*), int signo);

// Runs fn in the calling thread with traps delivered, real or emulated. Keep fn small: under
// emulation every instruction it runs traps.
void with_traps(const std::function<void()>& fn);

}  // namespace whymiss::soft::test
