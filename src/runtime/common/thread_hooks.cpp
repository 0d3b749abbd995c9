// pthread_create interposition: the new thread's index is reserved by its creator, so indices
// (and so simulated cores) follow creation order rather than the race to a first access.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "runtime/common/heap.h"
#include "runtime/common/runtime_state.h"

namespace {

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

struct Trampoline {
  void* (*start)(void*);
  void* arg;
  uint32_t index_plus_one;
};

void* start_thread(void* p) {
  Trampoline t = *static_cast<Trampoline*>(p);
  whymiss::rt::private_free(p);
  whymiss::rt::preassign_thread_index(t.index_plus_one);
  return t.start(t.arg);
}

CreateFn real_create() {
  static CreateFn fn = nullptr;
  if (!fn) {
    bool was = whymiss::rt::set_in_runtime(true);
    fn = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    whymiss::rt::set_in_runtime(was);
  }
  return fn;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int pthread_create(
    pthread_t* th, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  CreateFn real = real_create();
  if (!real) return EAGAIN;
  if (!whymiss::rt::recording()) return real(th, attr, start, arg);
  auto* t = static_cast<Trampoline*>(whymiss::rt::private_alloc(sizeof(Trampoline)));
  if (!t) return real(th, attr, start, arg);
  *t = Trampoline{start, arg, whymiss::rt::next_thread_index()};
  int rc = real(th, attr, start_thread, t);
  if (rc != 0) whymiss::rt::private_free(t);
  return rc;
}
