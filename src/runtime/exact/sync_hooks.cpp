// Interposed pthread functions whose ordering the relay must keep (thread_order.h): mutexes,
// condition variables and joins. Each calls libc's function and tells the runtime; none changes
// what the program sees.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include <atomic>

#include "runtime/common/runtime_state.h"
#include "runtime/exact/access_sink.h"
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

// Tells the runtime through f(), unless this thread is inside the sink already (access_sink.h's
// enter_sink): a signal handler's call that interrupted an access is then not told.
template <class F>
void tell(F&& f) {
  if (!whymiss::rt::enter_sink()) return;
  f();
  whymiss::rt::leave_sink();
}

// The memory traffic of glibc's mutex, which is not instrumented: lock, trylock and unlock each
// make an atomic read-modify-write of the mutex's first 16 bytes (__lock, __count, __owner,
// __nusers), simulated as one write at the caller's call site (`ret`, a return address), so a
// lock word that bounces between threads shows as the sharing it is. Not from inside the
// runtime, whose own std::mutex comes through these hooks too.
void lock_word_access(const pthread_mutex_t* m, void* ret) {
  const bool was = whymiss::rt::set_in_runtime(true);
  whymiss::rt::set_in_runtime(was);
  if (!was) tell([&] { whymiss::rt::on_access(reinterpret_cast<uintptr_t>(ret), addr_of(m), 16, true); });
}

using MutexFn = int (*)(pthread_mutex_t*);
// A lock taken by libc's `name`: what the previous holder published comes first.
int lock_with(std::atomic<MutexFn>& real, const char* name, pthread_mutex_t* m, void* ret) {
  const MutexFn fn = next_fn(real, name);
  if (fn == nullptr) return EINVAL;
  const int rc = fn(m);
  if (rc == 0) tell([&] { whymiss::rt::acquire_point(addr_of(m)); });
  lock_word_access(m, ret);  // (a failed trylock still took the line to compare)
  return rc;
}

}  // namespace

#define WM_HOOK extern "C" __attribute__((visibility("default")))

WM_HOOK int pthread_join(pthread_t th, void** ret) {
  static std::atomic<int (*)(pthread_t, void**)> real{nullptr};
  auto fn = next_fn(real, "pthread_join");
  if (fn == nullptr) return ESRCH;
  const int rc = fn(th, ret);
  if (rc == 0) tell([&] { whymiss::rt::after_join(th); });
  return rc;
}

WM_HOOK int pthread_mutex_lock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  return lock_with(real, "pthread_mutex_lock", m, __builtin_return_address(0));
}

WM_HOOK int pthread_mutex_trylock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  return lock_with(real, "pthread_mutex_trylock", m, __builtin_return_address(0));
}

WM_HOOK int pthread_mutex_unlock(pthread_mutex_t* m) {
  static std::atomic<MutexFn> real{nullptr};
  auto fn = next_fn(real, "pthread_mutex_unlock");
  if (fn == nullptr) return EINVAL;
  lock_word_access(m, __builtin_return_address(0));
  tell([&] { whymiss::rt::release_point(addr_of(m)); });
  return fn(m);
}

// A wait unlocks the mutex and locks it again before it returns (also on a timeout).
WM_HOOK int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  static std::atomic<int (*)(pthread_cond_t*, pthread_mutex_t*)> real{nullptr};
  auto fn = next_fn(real, "pthread_cond_wait", "GLIBC_2.3.2");
  if (fn == nullptr) return EINVAL;
  tell([&] { whymiss::rt::release_point(addr_of(m)); });
  const int rc = fn(c, m);
  tell([&] { whymiss::rt::acquire_point(addr_of(m)); });
  return rc;
}

WM_HOOK int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                                   const struct timespec* t) {
  static std::atomic<int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*)> real{
      nullptr};
  auto fn = next_fn(real, "pthread_cond_timedwait", "GLIBC_2.3.2");
  if (fn == nullptr) return EINVAL;
  tell([&] { whymiss::rt::release_point(addr_of(m)); });
  const int rc = fn(c, m, t);
  tell([&] { whymiss::rt::acquire_point(addr_of(m)); });
  return rc;
}
