// The runtime's interposed pthread functions (src/runtime/exact/sync_hooks.cpp) tell the runtime
// about a lock only outside the ABI layer's re-entrancy guard (access_sink.h's enter_sink): a
// signal handler that locks a mutex in the middle of an access must not reach the runtime then.
// Linked here with the ABI layer and a sink that counts what the hooks tell it; the sink locks a
// mutex from inside an access, as such a handler would, and the test checks that the hooks told
// it nothing of that lock, while the same lock outside an access is told.
#include <pthread.h>

#include <cstdint>
#include <cstdio>

#include "runtime/common/runtime_state.h"
#include "runtime/exact/access_sink.h"
#include "runtime/exact/thread_order.h"

extern "C" void __tsan_write8(void* addr);  // the ABI layer's entry (tsan_abi.cpp)

namespace {
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
uint64_t g_target;
int g_acquires = 0, g_releases = 0, g_lock_words = 0, g_lock_inside = 0;
}  // namespace

namespace whymiss::rt {
bool set_in_runtime(bool) noexcept { return false; }
void on_init() noexcept {}
uint64_t sync_before(uintptr_t, bool) noexcept { return 0; }
void sync_after(uintptr_t) noexcept {}
void sync_undo(uintptr_t, uint64_t) noexcept {}
void on_range(uintptr_t, uintptr_t, size_t, bool) noexcept {}
void acquire_point(uintptr_t) noexcept { ++g_acquires; }
void release_point(uintptr_t) noexcept { ++g_releases; }
void after_join(pthread_t) noexcept {}
void on_access(uintptr_t, uintptr_t addr, uint32_t, bool) noexcept {
  if (addr == reinterpret_cast<uintptr_t>(&g_mutex)) {
    ++g_lock_words;  // the hooks' simulated lock-word access
    return;
  }
  if (addr == reinterpret_cast<uintptr_t>(&g_target)) {  // an access: lock inside it
    ++g_lock_inside;
    pthread_mutex_lock(&g_mutex);
    pthread_mutex_unlock(&g_mutex);
  }
}
}  // namespace whymiss::rt

int main() {
  __tsan_write8(&g_target);
  if (g_lock_inside != 1 || g_acquires != 0 || g_releases != 0 || g_lock_words != 0) {
    std::fprintf(stderr, "FAIL: a lock inside an access was told to the runtime (acquires %d, "
                 "releases %d, lock-word accesses %d; sink entered %d)\n",
                 g_acquires, g_releases, g_lock_words, g_lock_inside);
    return 1;
  }
  pthread_mutex_lock(&g_mutex);
  pthread_mutex_unlock(&g_mutex);
  if (g_acquires != 1 || g_releases != 1 || g_lock_words != 2) {
    std::fprintf(stderr, "FAIL: a lock outside an access was not told (acquires %d, releases %d, "
                 "lock-word accesses %d)\n", g_acquires, g_releases, g_lock_words);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
