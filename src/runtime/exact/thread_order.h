// Synchronisation between threads that the __tsan_* ABI does not report (libc's locks and joins
// are not instrumented), for the relay's order between threads (relay.h). Implemented in
// runtime.cpp; called by the interposed pthread functions in sync_hooks.cpp. Each does nothing
// while the program has one thread, on the relay thread, or inside the runtime.
#pragma once
#include <pthread.h>

#include <cstdint>

namespace whymiss::rt {

// Before an operation on `addr` that publishes this thread's earlier accesses (an unlock).
void release_point(uintptr_t addr) noexcept;
// After an operation on `addr` that takes what another thread published (a lock).
void acquire_point(uintptr_t addr) noexcept;
// After pthread_join(th) returned: th's accesses come before the caller's next ones.
void after_join(pthread_t th) noexcept;

}  // namespace whymiss::rt
