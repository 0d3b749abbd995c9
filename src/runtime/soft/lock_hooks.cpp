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

// libc's definition of `name`, looked up once (dlsym may allocate: inside the runtime). The
// fast path is a load.
template <class Fn>
__attribute__((noinline)) Fn resolve(std::atomic<Fn>& cache, const char* name) {
  const bool was = whymiss::rt::set_in_runtime(true);
  const int saved = errno;
  Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  errno = saved;
  whymiss::rt::set_in_runtime(was);
  cache.store(fn, std::memory_order_release);
  return fn;
}
template <class Fn>
inline Fn next_fn(std::atomic<Fn>& cache, const char* name) {
  Fn fn = cache.load(std::memory_order_acquire);
  return __builtin_expect(fn != nullptr, 1) ? fn : resolve(cache, name);
}

// Whether this call is accounted (trace.h: the thread is stepping, or a native accounting
// period is open), windows are on, and the call is the program's, not the runtime's.
inline bool accounted() {
  return trace::lock_accounted() && g.trace_on &&
         g.state.load(std::memory_order_relaxed) == whymiss::rt::softrt::kRecording &&
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
inline int acquire(pthread_mutex_t* m, Call call) {
  if (__builtin_expect(!accounted(), 1)) return call();
  trace::LockMarks& mk = trace::t_lock_marks;
  ++mk.in_call;
  const int rc = call();
  --mk.in_call;
  if (rc == 0 || rc == EOWNERDEAD) hold(mk, m);
  return rc;
}

// libc's functions, each resolved at its hook's first call.
std::atomic<int (*)(pthread_mutex_t*)> g_lock{nullptr}, g_trylock{nullptr}, g_unlock{nullptr};
std::atomic<int (*)(pthread_mutex_t*, const struct timespec*)> g_timedlock{nullptr};
std::atomic<int (*)(pthread_mutex_t*, clockid_t, const struct timespec*)> g_clocklock{nullptr};

// The hooks' fast path: libc's function known, and nothing to account (no flag up, nothing held):
// a tail call with no frame of ours.
inline bool quiet(uint32_t held) { return held == 0 && !trace::lock_accounted(); }

__attribute__((noinline)) int lock_slow(pthread_mutex_t* m) {
  auto fn = next_fn(g_lock, "pthread_mutex_lock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m); });
}
__attribute__((noinline)) int trylock_slow(pthread_mutex_t* m) {
  auto fn = next_fn(g_trylock, "pthread_mutex_trylock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m); });
}
__attribute__((noinline)) int unlock_slow(pthread_mutex_t* m) {
  auto fn = next_fn(g_unlock, "pthread_mutex_unlock");
  if (fn == nullptr) return EINVAL;
  trace::LockMarks& mk = trace::t_lock_marks;
  if (mk.held == 0 && !accounted()) return fn(m);
  // Still holding it: the hand-over accounting is serialised by the mutex itself. A mutex taken
  // while accounted is unlisted whenever it is released, so the marks stay balanced.
  const bool ours = unhold(mk, m);
  const bool count = ours && accounted();
  if (count) trace::lock_releasing(m);
  ++mk.in_call;
  const int rc = fn(m);
  --mk.in_call;
  if (rc != 0 && ours) hold(mk, m);  // not released after all (an error-checking mutex)
  return rc;
}

}  // namespace

#define WM_HOOK extern "C" __attribute__((visibility("default")))

WM_HOOK int pthread_mutex_lock(pthread_mutex_t* m) {
  auto fn = g_lock.load(std::memory_order_acquire);
  if (__builtin_expect(fn != nullptr && quiet(0), 1)) return fn(m);
  return lock_slow(m);
}

WM_HOOK int pthread_mutex_trylock(pthread_mutex_t* m) {
  auto fn = g_trylock.load(std::memory_order_acquire);
  if (__builtin_expect(fn != nullptr && quiet(0), 1)) return fn(m);
  return trylock_slow(m);
}

WM_HOOK int pthread_mutex_unlock(pthread_mutex_t* m) {
  auto fn = g_unlock.load(std::memory_order_acquire);
  if (__builtin_expect(fn != nullptr && quiet(trace::t_lock_marks.held), 1)) return fn(m);
  return unlock_slow(m);
}

WM_HOOK int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* t) {
  auto fn = next_fn(g_timedlock, "pthread_mutex_timedlock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m, t); });
}

// (glibc 2.30; libstdc++'s timed mutexes wait with it.)
WM_HOOK int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t c, const struct timespec* t) {
  auto fn = next_fn(g_clocklock, "pthread_mutex_clocklock");
  if (fn == nullptr) return EINVAL;
  return acquire(m, [&] { return fn(m, c, t); });
}
