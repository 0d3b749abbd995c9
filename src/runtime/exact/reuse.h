// Exact mode's reuse-distance tracker, for miss-ratio curves (profile::ReuseRecord,
// analysis/mrc.h): for each access, how many distinct lines were used since its line was last
// used (its LRU stack distance), kept as histograms for the program at the simulated line size,
// at twice it and at half it, and per instruction at the simulated line size.
//
// Cost and bound: an access to the line of the thread's previous access never reaches the
// tracker (the hit path takes it; its distance is 0 and the analysis counts it from the totals),
// and a repeat of the line the tracker saw last is distance 0 with no stack work. Every other
// access pays, per line size, a shadow-table load (line -> time of its last access) and a count of
// the markers after that time in a bitmap over times (reuse_stack.h): exact distances, every line
// followed, memory growing with the footprint (the shadow: 4 bytes per line; the times: 8-16
// bytes per line followed). Past Knobs::max_lines lines (or when memory cannot be had) a stack
// falls back to spatial sampling (SHARDS): only lines whose hash falls under a threshold are
// followed, the threshold halving until they fit, each followed access counting 1/rate.
// Knobs::rate_shift > 0 samples from the start (cheaper: the others pay a hash and a compare).
//
// Half lines: the hit path takes accesses to the thread's previous line without calling access(),
// and at half the line size such an access may be to the other half. The hit path calls on_hit()
// after each hit it takes (a compare with the half line the tracker saw last); a switch of halves
// feeds the half-line stack alone (half_switch), so that its stream is every change of half line,
// as exact as the others (a repeat of the same half is distance 0 and needs nothing). Held hits
// of multi-threaded programs (relay lanes) do not call it: their curves are approximate anyway
// (one merged stream). By default the half-line stack follows every half line (kHalfDefault).
//
// Threading: all threads' accesses form one stream, as a cache they all shared would see them.
// access() takes a spinlock only when told the simulator runs concurrently (without the relay,
// several threads call it at once), and with the worker then only once per 64 of a thread's
// accesses (per-thread batches: a thread's accesses join the stream up to 63 accesses late);
// otherwise its callers are already serialised. With
// Knobs::thread (exact mode's default) the stacks are the work of a thread of their own: access()
// and the hit path's half switches append an event to a 64 KiB buffer, and the worker applies
// full buffers in order, so the curves are those of applying them at once. On a machine with a
// free core the program's thread no longer waits for them (the tracker was a third of exact
// mode's time on real programs); its CPU time stays. When all 8 buffers are queued the producer
// applies the oldest itself: memory stays bounded and a worker without a core costs the program
// no more than applying them at once. Exports apply what is queued (recording has stopped).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "model/profile.h"

namespace whymiss::rt::reuse {

struct Knobs {
  // Lines followed per line size before the rate halves: 16 Mi (1 GiB at 64-byte lines; the
  // tracker's time arrays are then at most about 300 MiB; the shadow adds 4 bytes per line of
  // address space touched, in 2 MiB pages once huge pages are on, so sparse footprints cost more).
  uint32_t max_lines = 1u << 24;
  unsigned rate_shift = 0;           // follow 1 line in 2^rate_shift at first (0: every line)
  uint32_t max_instructions = 256;   // instructions with a histogram of their own (first come)
  // The half-line stack: off, or its first rate (as rate_shift; it has the same bound).
  bool half = true;
  unsigned half_rate_shift = 0;
  // Apply the accesses on a thread of the tracker's own, in order, from buffers the simulating
  // thread fills (access() then costs a 16-byte store): the curves are the same, the program's
  // thread does not wait for them. Off: access() applies each at once. Without memory or a
  // thread for it, off.
  bool thread = false;
  // With `thread`: false queues the accesses in the buffers but starts no worker, so the producer
  // applies each buffer once all are queued, as when the worker gets no core (tests).
  bool worker = true;
};

// WHYMISS_MRC_HALF's words into `k`: "all" follows every half line, "sampled" one in
// 2^kHalfSampledShift, "0" turns the half-line stack off; anything else (or nothing) leaves the
// default, kHalfDefault ("all" or "sampled"), unless `k` already samples (WHYMISS_MRC=sampled).
inline constexpr unsigned kHalfSampledShift = 4;
extern const char* const kHalfDefault;
void half_knob(const char* env, Knobs* k) noexcept;

// What the hit path compares with (on_hit): the half line of the tracker's last access is
// `base` == addr & `mask`. Both 0 while the half-line stack is off (never a switch).
struct HalfWatch {
  std::atomic<uint64_t> mask{0}, base{0};
};
extern constinit HalfWatch g_half;

// The half-line stack's share of an access the hit path took (another half of the same line).
void half_switch(uint64_t addr) noexcept;
// The second half of an access that spans both halves of its line (`last`: its last byte): at
// half the line it is two accesses, as a simulation with half-size lines would count it.
void half_span(uint64_t last) noexcept;
// After a hit the hit path took by itself (the thread's previous line: distance 0 at the
// simulated line size and twice it), of `size` bytes at `addr`, within one line. Single-threaded
// callers only (the hit path's memo).
__attribute__((always_inline)) inline void on_hit(uint64_t addr, uint32_t size) noexcept {
  const uint64_t mask = g_half.mask.load(std::memory_order_relaxed);
  if (__builtin_expect((addr & mask) != g_half.base.load(std::memory_order_relaxed), 0)) half_switch(addr);
  if (__builtin_expect(((addr + size - 1) & mask) != (addr & mask), 0)) half_span(addr + size - 1);
}

// `line_shift`: log2 of the simulated line size. False when memory could not be had. Once per
// process (the tracker is a process-wide singleton): a later call returns false and changes
// nothing.
bool start(unsigned line_shift, const Knobs& k = {});
// Whether a worker thread applies the accesses (Knobs::thread and Knobs::worker, and it started).
bool worker_running() noexcept;
// One access by instruction `ip` (a return address minus one, as the profile keys them).
// `size`: its bytes (an access spanning both halves of its line is two at half the line; only its
// first line counts at the simulated line size and twice it). `concurrent`: other threads may
// call access() at the same time (with the worker, the access then goes to this thread's batch).
void access(uint64_t ip, uint64_t addr, uint32_t size, bool concurrent) noexcept;
// The calling thread is exiting: its batched accesses join the stream now, not at the export.
void thread_done() noexcept;
// Records written by export_records: 2 or 3 program histograms + instructions. Call once
// recording stopped: it applies what the worker has queued first (and stops it).
size_t record_count() noexcept;
// Fills up to `max` records; returns how many. Call once recording stopped.
size_t export_records(profile::ReuseRecord* out, size_t max) noexcept;
// How each line size's histogram was obtained (Section::ReuseInfo): info_count() records, one per
// program histogram, in the same order. Call once recording stopped.
size_t info_count() noexcept;
size_t export_info(profile::ReuseInfoRecord* out, size_t max) noexcept;

}  // namespace whymiss::rt::reuse
