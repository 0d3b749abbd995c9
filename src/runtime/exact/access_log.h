// Exact mode's access log (profile::AccessLogRecord): every access the simulator takes, hits on
// the inline hit paths included, packed into 8 bytes, in about the order the simulator takes
// them (hits a thread counts itself while the relay runs are appended from that thread, so the
// order is approximate), for the what-if replays of analysis/predict.h (a fix applied to addresses, re-simulated at report
// time, without re-running the program).
//
// Bound: a fixed array reserved at start (WHYMISS_ACCESS_LOG entries, default 2^22 = 32 MiB,
// MAP_NORESERVE: pages are only committed as the log fills); 0 turns it off. When it is full,
// later accesses are not kept (the profile's total says how many there were): a replay then
// covers the run's first accesses, and says so. Appending is one relaxed fetch_add and a store;
// once full, one relaxed load (an unlocked xadd instead of the locked add where the caller is
// the only thread). Threads that simulate their own accesses at once (WHYMISS_INTERLEAVE=locks or
// parallel) take 256 entries per locked add instead and fill them alone, so that no host line is
// written by every thread per access: their accesses are then in runs of up to 256 per thread,
// and a block a thread did not fill (it exited, or recording stopped) leaves zero entries, which
// kept() removes (no access is logged as 0: that would be a 1-byte read of address 0). No
// allocation, no lock, never blocks: safe on every access path.
// Order across synchronisation, for threads that log their own accesses into blocks: a thread
// that acquires (a lock, a join, an acquiring atomic) ends its block there (seal()), unless no
// block was reserved after it, so that its next accesses lie after every block holding an access
// the releasing thread made before releasing: the log keeps the order of hand-overs (threads
// taking turns on a lock: the what-if view's latent false sharing replays it). Accesses that race
// stay in runs of up to 256, and so does the acquiring atomic's own access (logged before the
// operation). A thread whose blocks get sealed early reserves smaller ones (down to 8 entries;
// back up as they fill), so that a program that hands over every few accesses leaves fewer empty
// block ends in the log; a thread that acquires every access or two while other threads reserve
// blocks still fills the log up to 4-8x faster than its accesses would (blocks of 8).
#pragma once
#include <atomic>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt::alog {

struct Log {
  uint64_t* entries = nullptr;
  uint64_t capacity = 0;  // 0: off
  std::atomic<uint64_t> next{0};
  std::atomic<bool> blocks{false};  // some thread reserved a block (kept() then compacts)
};
extern constinit Log g_log;

// A thread's reserved entries [next, end) (see above), and how many to reserve next. Only its
// thread touches it.
struct Block {
  uint64_t next = 0, end = 0;
  uint64_t start = 0, size = 0;  // the block's first entry; the next block's size (0: kBlock)
};
inline constexpr uint64_t kBlock = 256;
inline constexpr uint64_t kMinBlock = 8;
extern constinit thread_local Block t_block __attribute__((tls_model("initial-exec")));
// Reserves the calling thread's next block; false when the log is full (or off).
bool reserve_block() noexcept;

// Reserves the log (`entries` entries). False when memory could not be had (the log stays off).
bool start(uint64_t entries) noexcept;

// `serialised`: no other thread appends meanwhile (the process has one recording thread and no
// relay), so the slot is taken without a locked add (which also waits for every store before
// it, per access): an unlocked xadd, one instruction, so that a signal handler of the same
// thread that appends (instrumented code in it) takes the next slot and not this one. (A load
// and a store were two: a handler between them got the same slot, and one entry was lost.)
__attribute__((always_inline)) inline void append(uint64_t addr, uint32_t size, bool write,
                                                  uint32_t thread, bool serialised = false) noexcept {
  Log& l = g_log;
  const uint64_t next = l.next.load(std::memory_order_relaxed);
  if (next >= l.capacity) return;  // off, or full
  uint64_t i = 1;
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                std::atomic<uint64_t>::is_always_lock_free);
  if (serialised)
    asm volatile("xaddq %0, %1" : "+r"(i), "+m"(*reinterpret_cast<uint64_t*>(&l.next)));
  else i = l.next.fetch_add(1, std::memory_order_relaxed);
  if (i < l.capacity) l.entries[i] = profile::access_log_pack(addr, size, write, thread);
}

// append() for threads that simulate their own accesses at once (no relay): into the calling
// thread's block (see above). A signal handler's accesses on this thread never get here
// meanwhile: the ABI layer's re-entrancy guard drops them (tsan_abi.cpp; the interposed pthread
// functions take it too, enter_sink), and runtime.cpp's t_in_runtime inside the runtime.
__attribute__((always_inline)) inline void append_own(uint64_t addr, uint32_t size, bool write,
                                                      uint32_t thread) noexcept {
  Log& l = g_log;
  Block& b = t_block;
  // (>=: a signal handler's seal() between this check and the store below leaves next at end + 1.)
  if (b.next >= b.end && (l.next.load(std::memory_order_relaxed) >= l.capacity || !reserve_block()))
    return;
  l.entries[b.next++] = profile::access_log_pack(addr, size, write, thread);
}

// The calling thread acquired (see above): its next access starts a new block. Sized for what
// this one held: half as large when under a quarter was used. Only the thread's own state.
// `acquired`: called after the acquire (not before an operation that is about to acquire).
inline void seal(bool acquired) noexcept {
  Block& b = t_block;
  if (b.next >= b.end) return;
  // Nothing can lie after a block that ends the log. And after the acquire, with no block
  // reserved after this one, what any thread logged so far lies before this block's free
  // entries, what a releaser logged before its release included (it reserved before it released).
  if (b.end == g_log.capacity ||
      (acquired && g_log.next.load(std::memory_order_relaxed) == b.end))
    return;
  const uint64_t size = b.size ? b.size : kBlock;
  if ((b.next - b.start) * 4 < size) b.size = size / 2 > kMinBlock ? size / 2 : kMinBlock;
  b.end = b.next;
}

// The entries kept (call once recording stopped, and no thread appends any more): the first
// time after threads reserved blocks, the entries their unfilled blocks left are taken out.
uint64_t kept() noexcept;

}  // namespace whymiss::rt::alog
