// Signal dispositions as a preloaded or linked runtime must handle them (used by both runtimes:
// exact/runtime.cpp and soft/runtime.cpp).
//
//  - Fatal and terminating signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM,
//    SIGHUP, SIGQUIT) whose disposition is SIG_DFL: the runtime stands in for the default action,
//    so the profile is written (finish(sig)) and then the default action happens (the program
//    still dies of that signal, with a core dump where the default makes one). The program keeps
//    seeing SIG_DFL through sigaction(); any handler it installs replaces ours.
//  - The runtime's own signals (reserve()): the program's requests for that number are kept
//    aside instead of replacing the runtime's handler, and the program still sees, through
//    sigaction(), what it asked for. Signals of that number that the runtime does not recognise
//    as its own (sent by kill/sigqueue/tgkill: si_code <= 0) are passed to forward(), which runs
//    what the program asked for (its handler, nothing for SIG_IGN, the default action for
//    SIG_DFL). The program's sa_mask and SA_RESETHAND/SA_NODEFER are not honoured for that one
//    number (documented limit).
// sigaction() and signal() are interposed (exported from the runtime's shared object); calls
// inside libc that bypass the PLT are not seen. In a process other than `owner` (a forked
// child) everything passes straight through.
#pragma once
#include <signal.h>
#include <sys/types.h>

namespace whymiss::rt::sig {

using FinishFn = void (*)(int term_signal);

// libc's sigaction (the next definition after ours), or nullptr.
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// Installs the stand-in handlers where the disposition is the default. Not async-signal-safe.
void install_fatal_guards(FinishFn finish, pid_t owner);

// Keeps the program's requests for `signo` aside from now on (the runtime has installed its
// handler for it). Up to two signals (the soft runtime's sampling signal, and SIGTRAP while it
// single-steps threads); further ones are ignored.
void reserve(int signo);

// From now on the program cannot block `signo` (SIGTRAP while the soft runtime may have int3
// breakpoints in its code: a thread that traps with it blocked is killed): it is taken out of
// the sets given to sigprocmask() and pthread_sigmask() (SIG_BLOCK, SIG_SETMASK; both are
// interposed) and of the sa_mask of the handlers it installs. Calls that bypass the PLT (inside
// libc) and raw system calls are not seen. Not async-signal-safe; one signal at a time.
void keep_unblocked(int signo);

// Runs what the program asked for `sig` (a reserved signal; nothing for others).
// Async-signal-safe.
void forward(int sig, siginfo_t* si, void* ctx);

// True once the program has asked for a disposition of the reserved signal `signo` other than
// SIG_DFL (the runtime says so in its notes).
bool program_claimed(int signo);

}  // namespace whymiss::rt::sig
