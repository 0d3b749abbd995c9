// The default action for a SIGTRAP that is not the soft runtime's (its trace windows' steps or
// its int3 breakpoints): SIG_DFL is restored and the trap happens again, so the program gets
// what it would have got without us. Async-signal-safe.
#pragma once
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace whymiss::soft {

inline void sigtrap_default_action(siginfo_t* si, ucontext_t* uc) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGTRAP, &dfl, nullptr);
  const uint64_t rip = uint64_t(uc->uc_mcontext.gregs[REG_RIP]);
  if (si->si_code == SI_KERNEL && rip &&
      __atomic_load_n(reinterpret_cast<const uint8_t*>(rip - 1), __ATOMIC_RELAXED) == 0xCC) {
    uc->uc_mcontext.gregs[REG_RIP] = greg_t(rip - 1);  // the int3 runs again, unhandled
    return;
  }
  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGTRAP);  // delivered once we return
}

}  // namespace whymiss::soft
