// Interposed pthread functions whose ordering the relay must keep (thread_order.h): mutexes,
// condition variables and joins. Each calls libc's function and tells the runtime; none changes
// what the program sees.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include <atomic>

#include "runtime/common/runtime_state.h"
#include "runtime/exact/thread_order.h"

namespace {

// libc's definition of `name`, looked up once (dlsym may allocate: inside the runtime). With a
// version: the condition-variable functions exist in two ABIs, and the one that matches libc's
// pthread_cond_signal must be called whatever the program was linked against.
template <class Fn>
Fn next_fn(std::atomic<Fn>& cache, const char* name, const char* version = nullptr) {
  Fn fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    const bool was = whymiss::rt::set_in_runtime(true);
    fn = reinterpret_cast<Fn>(version ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name));
    whymiss::rt::set_in_runtime(was);
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}

uintptr_t addr_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

using MutexFn = int (*)(pthread_mutex_t*);
// A lock taken by libc's `name`: what the previous holder published comes first.
int lock_with(std::atomic<MutexFn>& real, const char* name, pthread_mutex_t* m) {
  const MutexFn fn = next_fn(real, name);
  if (fn == nullptr) return EINVAL;
  const int rc = fn(m);
  if (rc == 0) whymiss::rt::acquire_point(addr_of(m));
  return rc;
}

}  // namespace

#define WM_HOOK extern "C" __attribute__((visibility("default")))

WM_HOOK int pthread_join(pthread_t th, void** ret) {
  static std::atomic<int (*)(pthread_t, void**)> real{nullptr};
  auto fn = next_fn(real, "pthread_join");
  if (fn == nullptr) return ESRCH;
  const int rc = fn(th, ret);
  if (rc == 0) whymiss::rt::after_join(th);
  return rc;
}

WM_HOOK int pthread_mutex_lock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  return lock_with(real, "pthread_mutex_lock", m);
}

WM_HOOK int pthread_mutex_trylock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  return lock_with(real, "pthread_mutex_trylock", m);
}

WM_HOOK int pthread_mutex_unlock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_unlock");
  if (fn == nullptr) return EINVAL;
  whymiss::rt::release_point(addr_of(m));
  return fn(m);
}

// A wait unlocks the mutex and locks it again before it returns (also on a timeout).
WM_HOOK int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  static std::atomic<int (*)(pthread_cond_t*, pthread_mutex_t*)> real{nullptr};
  auto fn = next_fn(real, "pthread_cond_wait", "GLIBC_2.3.2");
  if (fn == nullptr) return EINVAL;
  whymiss::rt::release_point(addr_of(m));
  const int rc = fn(c, m);
  whymiss::rt::acquire_point(addr_of(m));
  return rc;
}

WM_HOOK int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                                   const struct timespec* t) {
  static std::atomic<int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*)> real{
      nullptr};
  auto fn = next_fn(real, "pthread_cond_timedwait", "GLIBC_2.3.2");
  if (fn == nullptr) return EINVAL;
  whymiss::rt::release_point(addr_of(m));
  const int rc = fn(c, m, t);
  whymiss::rt::acquire_point(addr_of(m));
  return rc;
}
