// Thread numbering shared by the runtime core and the pthread_create hook.
#pragma once
#include <cstdint>

namespace whymiss::rt {

// Reserves the next thread index for a thread about to be created; returns index + 1.
uint32_t next_thread_index() noexcept;
// Called first thing in the new thread with the value next_thread_index() returned.
void preassign_thread_index(uint32_t index_plus_one) noexcept;

}  // namespace whymiss::rt

namespace whymiss::rt {
// Marks the calling thread as inside the runtime (its allocations go to the private heap and
// its accesses are not recorded); returns the previous value for restoring.
bool set_in_runtime(bool inside) noexcept;
}  // namespace whymiss::rt
