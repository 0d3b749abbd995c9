// What the soft collectors read about their own process from /proc/self, with stack buffers
// and system calls only: async-signal-safe, never allocating.
#pragma once
#include <cstdint>

namespace whymiss::soft::detail {

// Protection (PROT_*) of the mapping containing addr (/proc/self/maps): 0, or an errno (ENOENT:
// no mapping).
int mapping_prot(uint64_t addr, int* prot);

// Whether a thread of the process has SIGTRAP blocked now (SigBlk in /proc/self/task/*/status:
// it would be killed by an int3) or runs under strict seccomp (Seccomp: 1: the trap's handler's
// system calls would kill it; filters, mode 2, are not looked into). Errors and an unreadable
// SigBlk count as "yes".
bool some_thread_refuses_int3();

}  // namespace whymiss::soft::detail
