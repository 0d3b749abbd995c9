// A thread of the runtime's own inside the program (exact mode's relay, the reuse tracker's
// worker): created with libc's pthread_create, found with dlsym(RTLD_NEXT), because the runtime's
// interposed one would count it as a program thread; every signal blocked on it (it inherits the
// creator's mask for the call), so none of the program's handlers ever runs there; detached, with
// a 256 KiB stack. Header-only: test builds link the users without the runtime.
#pragma once
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace whymiss::rt {

// Starts `fn(nullptr)` on such a thread. False, with nothing started, when it cannot.
inline bool start_own_thread(void* (*fn)(void*)) noexcept {
  using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  auto create = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (create == nullptr) return false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  const bool ok = create(&th, &attr, fn, nullptr) == 0;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

// On such a thread, at its start: adds `nice_by` (> 0) to its own nice value (Linux: per thread;
// at most 19; unchanged when it cannot), then names it `name` (at most 15 characters; for top,
// perf and the tests: a thread with the name has its nice). Leaves errno changed: its own thread.
inline void settle_own_thread(const char* name, int nice_by) noexcept {
  if (nice_by > 0) {
    const id_t tid = id_t(syscall(SYS_gettid));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) setpriority(PRIO_PROCESS, tid, now + nice_by > 19 ? 19 : now + nice_by);
  }
  prctl(PR_SET_NAME, name, 0, 0, 0);
}

// CLOCK_MONOTONIC in nanoseconds: the clock their waits are timed by.
inline uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// How such a thread and the program's threads wait for each other: FUTEX_WAIT/FUTEX_WAKE on an
// atomic int (private to the process), `timeout` relative or null.
inline void futex(std::atomic<int>* addr, int op, int val, const timespec* timeout) noexcept {
  syscall(SYS_futex, reinterpret_cast<int*>(addr), op, val, timeout, nullptr, 0);
}

}  // namespace whymiss::rt
