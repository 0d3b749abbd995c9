// Interface between the compiler-facing ABI layer (tsan_abi.cpp) and whatever consumes the memory
// accesses (the exact-mode cache simulator, or a test sink). The ABI layer defines none of these
// but enter_sink and leave_sink (below); exactly one sink implementation must be linked into the
// instrumented program.
//
// Contract for implementations:
//  * Called from arbitrary user threads, concurrently, and from signal handlers: must be thread-safe
//    and async-signal-safe (no malloc, no locks that a signal handler could re-enter, no stdio).
//  * Must not be compiled with -fsanitize=thread (it would recurse into the ABI layer).
//  * on_access/on_range can arrive before on_init (instrumented code run from constructors of
//    higher priority than __tsan_init's, or from shared libraries initialised first); cope with it.
//  * `ip` is a RETURN address: the address of the instruction after the call into the ABI layer in
//    the user's code. Subtract 1 before symbolising (addr2line/DWARF line lookup), otherwise an access
//    that is the last instruction of an inlined range or of a line is attributed to the next one.
//    ip is 0 when unknown.
#pragma once

#include <cstddef>
#include <cstdint>

namespace whymiss::rt {

// One memory access of `size` bytes (1, 2, 4, 8 or 16 for compiler-emitted accesses; atomic
// read-modify-writes are reported once, as a write).
void on_access(uintptr_t ip, uintptr_t addr, uint32_t size, bool write) noexcept;

// A contiguous range: memcpy/memset/memmove (source = read, destination = write), struct copies and
// unaligned/odd-sized accesses that GCC reports through __tsan_read_range/__tsan_write_range.
// size may be 0.
void on_range(uintptr_t ip, uintptr_t addr, size_t size, bool write) noexcept;

// Synchronisation by an atomic operation on `addr`, for sinks that order threads (exact mode's
// relay). sync_before() right before an operation that releases (it publishes what this thread
// did before it), told whether it also acquires (then it takes care of that too); sync_after()
// right after one that acquires and did not release; sync_undo() after a compare-exchange that
// failed, so released nothing, with what sync_before returned.
uint64_t sync_before(uintptr_t addr, bool acquires) noexcept;
void sync_after(uintptr_t addr) noexcept;
void sync_undo(uintptr_t addr, uint64_t before) noexcept;

// Defined by the ABI layer, for code of the sink's library that is entered from outside it (the
// interposed pthread functions): takes the layer's per-thread re-entrancy guard, false (nothing
// taken) when the thread is inside the sink already, e.g. a signal handler's call in the middle
// of an access. leave_sink() after a true.
bool enter_sink() noexcept;
void leave_sink() noexcept;

// Called once per process, from the first __tsan_init (each instrumented translation unit calls
// __tsan_init from a high-priority constructor; the ABI layer deduplicates).
void on_init() noexcept;

}  // namespace whymiss::rt
