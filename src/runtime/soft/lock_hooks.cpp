// Soft mode's interposed pthread mutex calls: each calls libc's function unchanged and tells the
// trace module (soft/trace.h) what it needs to weigh lock hand-overs: the calling thread's marks
// (inside a lock or unlock call; holding a mutex) for the accesses a trace window records, and
// every release of a mutex it took, for the hand-over counts (profile::LockInfoRecord). Why: stepping
// slows a thread's own code ~1000x but not the kernel's wake-ups, so in a window a contended
// mutex changes hands far more often per acquisition than it does natively; the analysis scales
// the replayed coherence misses of critical sections by the two measured hand-over shares.
// Contracts: what the program sees is libc's result and errno; nothing allocates (libc's
// functions are looked up at the first call, inside the runtime); inside the runtime (its own
// locks) and when trace windows are off, the calls pass straight through.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include <atomic>

#include "runtime/common/heap.h"
#include "runtime/common/runtime_state.h"
#include "runtime/soft/runtime_internal.h"
#include "runtime/soft/trace.h"

namespace {

using whymiss::rt::softrt::g;
namespace trace = whymiss::soft::trace;

template <class Fn>
Fn next_fn(std::atomic<Fn>& cache, const char* name) {
  Fn fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    const bool was = whymiss::rt::set_in_runtime(true);
    const int saved = errno;
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    errno = saved;
    whymiss::rt::set_in_runtime(was);
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}

// Whether this call is the program's and windows are on (then it is accounted).
bool accounted() {
  return g.trace_on && g.state.load(std::memory_order_relaxed) == whymiss::rt::softrt::kRecording &&
         !whymiss::rt::in_runtime();
}

void hold(trace::LockMarks& mk, const void* m) {
  if (mk.listed < trace::LockMarks::kHeldSlots) mk.mutexes[mk.listed++] = m;
  else ++mk.overflow;
  ++mk.held;
}

// Takes `m` off the thread's list; false if it was not on it (nor can be in the overflow).
bool unhold(trace::LockMarks& mk, const void* m) {
  for (uint32_t i = mk.listed; i-- > 0;)
    if (mk.mutexes[i] == m) {
      mk.mutexes[i] = mk.mutexes[--mk.listed];
      --mk.held;
      return true;
    }
  if (!mk.overflow) return false;
  --mk.overflow;
  --mk.held;
  return true;
}

// Runs libc's acquisition `call` with the in-call mark up; a success lists the mutex as held.
// EOWNERDEAD (a robust mutex whose holder died) is an acquisition too.
template <class Call>
int acquire(pthread_mutex_t* m, Call call) {
  if (!accounted()) return call();
  trace::LockMarks& mk = trace::lock_marks();
  ++mk.in_call;
  const int rc = call();
  --mk.in_call;
  if (rc == 0 || rc == EOWNERDEAD) hold(mk, m);
  return rc;
}

}  // namespace

#define WM_HOOK extern "C" __attribute__((visibility("default")))

WM_HOOK int pthread_mutex_lock(pthread_mutex_t* m) {
  static std::atomic<int (*)(pthread_mutex_t*)> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_lock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m); });
}

WM_HOOK int pthread_mutex_trylock(pthread_mutex_t* m) {
  static std::atomic<int (*)(pthread_mutex_t*)> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_trylock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m); });
}

WM_HOOK int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* t) {
  static std::atomic<int (*)(pthread_mutex_t*, const struct timespec*)> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_timedlock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m, t); });
}

// (glibc 2.30; libstdc++'s timed mutexes wait with it.)
WM_HOOK int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t c, const struct timespec* t) {
  static std::atomic<int (*)(pthread_mutex_t*, clockid_t, const struct timespec*)> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_clocklock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m, c, t); });
}

WM_HOOK int pthread_mutex_unlock(pthread_mutex_t* m) {
  static std::atomic<int (*)(pthread_mutex_t*)> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_unlock");
  if (fn == nullptr) return EINVAL;
  if (!accounted()) return fn(m);
  trace::LockMarks& mk = trace::lock_marks();
  // Still holding it: the hand-over accounting is serialised by the mutex itself.
  const bool ours = unhold(mk, m);
  if (ours) trace::lock_releasing(m);
  ++mk.in_call;
  const int rc = fn(m);
  --mk.in_call;
  if (rc != 0 && ours) hold(mk, m);  // not released after all (an error-checking mutex)
  return rc;
}
