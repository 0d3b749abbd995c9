// A thread of the runtime's own inside the program (exact mode's relay, the reuse tracker's
// worker): created with libc's pthread_create, found with dlsym(RTLD_NEXT), because the runtime's
// interposed one would count it as a program thread; every signal blocked on it (it inherits the
// creator's mask for the call), so none of the program's handlers ever runs there; detached, with
// a 256 KiB stack. Header-only: test builds link the users without the runtime.
#pragma once
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
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
