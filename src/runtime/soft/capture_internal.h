// Working state of the capture stage (capture.h), shared by its files: capture.cpp (set-up,
// threads, the signal path, results), capture_events.cpp (perf events and the fd table) and
// capture_sched.cpp (candidate tables and tick). Not part of the interface.
//
// Everything lives in one anonymous mapping made by init(); nothing is allocated afterwards.
// Who writes what (the reason the stage needs no lock):
//  - Thread entries: claimed and released by their own thread (add/remove_thread); their event
//    fds are changed only by the collector (tick/stop) while it holds the entry in kBusy, or by
//    the thread itself in remove_thread while it holds it in kLeaving. Their capture chunks are
//    written only by the handler running in that thread.
//  - Windows: filled by tick (one caller at a time); handlers only bump their atomic counters.
//  - fd table: written by whoever opens/closes the fd (cleared *before* close, so a late signal
//    of a closed fd finds nothing); read by handlers.
//  - Candidate tables: counts bumped by note_sample from any thread or handler (lock-free,
//    approximate under races by design); decayed and chosen from by tick.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/soft/capture.h"

namespace whymiss::soft::capture::detail {

inline constexpr uint32_t kMaxSlots = 8;       // arrays are sized for this; x86-64 has 4 DRs
inline constexpr uint32_t kChunk = 256;        // capture records per buffer chunk (12 KiB)
inline constexpr uint32_t kFdTable = 1u << 16; // fds at or above this are closed and refused
inline constexpr uint32_t kHotEntries = 4096;  // instruction candidates (power of two)
inline constexpr uint32_t kLineEntries = 4096; // line candidates (power of two)
inline constexpr uint32_t kProbe = 16;         // linear probe bound of both tables
inline constexpr uint32_t kLineBytes = 64;     // sharing granularity (x86-64 line)
inline constexpr uint32_t kWords = kLineBytes / 8;
inline constexpr uint32_t kNone = 0xFFFFFFFFu;

enum : uint32_t { kFree = 0, kLive = 1, kBusy = 2, kLeaving = 3 };

struct Thread {
  std::atomic<uint32_t> state;
  pid_t tid;
  uint32_t index;                        // the runtime's thread index
  int fd[kMaxSlots];                     // -1: nothing armed in this slot
  uint32_t window[kMaxSlots];            // window armed in the slot (when fd >= 0)
  std::atomic<uint32_t> hits[kMaxSlots]; // traps taken for the slot's current window
  uint32_t chunk;                        // current chunk + 1 (0: none yet); own handler only
};

struct ChunkHead {
  uint32_t thread;              // runtime thread index of the owner
  uint32_t next;                // the owner's next chunk + 1 (0: last)
  uint32_t first;               // 1: first chunk of a thread's lifetime (export starts here)
  std::atomic<uint32_t> count;  // records written (release after the record)
};

struct Window {
  uint64_t ip;    // the instruction (reason 0); for reason 1 an instruction sampled on the word
  uint64_t word;  // the watched 8-byte word (reason 1)
  uint64_t start_ns, end_ns;
  uint32_t reason, slot;
  uint32_t threads;  // threads the event was armed in
  uint32_t open;     // 1 while armed (tick only)
  std::atomic<uint32_t> captures, dropped;
};

struct HotEntry {
  std::atomic<uint64_t> ip;
  std::atomic<uint32_t> count;
  uint64_t last_armed_ns;  // tick only
};

struct LineEntry {
  std::atomic<uint64_t> line;  // line number + 1 (0: empty)
  std::atomic<uint32_t> count;
  std::atomic<uint32_t> first_thread;  // first sampling thread index (kNone: none yet)
  std::atomic<uint32_t> multi;         // 1: a second thread sampled it
  std::atomic<uint32_t> written;       // 1: a write was sampled
  std::atomic<uint64_t> word_ip[kWords];   // an instruction sampled on each word (0: none)
  std::atomic<uint32_t> word_flags[kWords];  // profile::kAccessRead/Write seen on the word
  uint64_t last_armed_ns[kWords];            // tick only
};

struct State {
  Config cfg;
  ObjectLookup lookup = nullptr;
  void* map = nullptr;
  size_t map_bytes = 0;
  Thread* threads = nullptr;
  Window* windows = nullptr;
  ChunkHead* chunk_heads = nullptr;
  profile::CaptureRecord* records = nullptr;
  uint32_t nchunks = 0;
  std::atomic<uint64_t>* fds = nullptr;  // kFdTable entries, see pack_fd
  HotEntry* hot = nullptr;
  LineEntry* lines = nullptr;
  std::atomic<uint32_t> next_chunk{0};
  std::atomic<uint32_t> nwindows{0};      // published windows (release after filling)
  std::atomic<uint32_t> thread_hw{0};     // entries ever claimed (scans stop here)
  std::atomic<bool> sched_busy{false};    // tick or stop running (tick skips, stop waits)
  std::atomic<uint64_t> captures{0}, dropped{0}, open_failures{0}, rejected{0};
  std::atomic<uint64_t> watch_windows{0};
  std::atomic<int> first_errno{0};
  std::atomic<bool> on{false};       // init done and not stopped: tick may arm
  std::atomic<bool> ready{false};    // tables mapped: handlers may look
  // Scheduler (tick only).
  uint32_t slot_window[kMaxSlots] = {};   // window open in each slot, or kNone
  uint64_t slot_backoff[kMaxSlots] = {};  // no arming in the slot before this time
  int64_t budget_ns = 0;             // capture time the stage may still spend
  uint64_t last_tick_ns = 0, last_decay_ns = 0;
};

State& g();

// fd table entry: valid bit, slot, thread entry, window.
inline uint64_t pack_fd(uint32_t slot, uint32_t entry, uint32_t window) {
  return (uint64_t(1) << 63) | (uint64_t(slot & 0x7F) << 56) | (uint64_t(entry & 0xFFFFFF) << 32) |
         window;
}
inline uint32_t fd_slot(uint64_t v) { return uint32_t(v >> 56) & 0x7F; }
inline uint32_t fd_entry(uint64_t v) { return uint32_t(v >> 32) & 0xFFFFFF; }
inline uint32_t fd_window(uint64_t v) { return uint32_t(v); }

// Counts a refusal, remembering the first errno.
void note_failure(int err);

// Events (capture_events.cpp). Opens the breakpoint of window `w` (slot `slot`) in thread entry
// `e`, signal routed to that thread, enabled for cfg.captures_per_window hits. Returns 0 or the
// errno of the step that refused (already counted). The caller holds the entry (kBusy/kLeaving).
int arm_event(uint32_t e, uint32_t slot, uint32_t w);
// Disables and closes the slot's event of entry `e` (fd table cleared first). Caller holds it.
void disarm_event(uint32_t e, uint32_t slot);

// Whether debug registers work here: 0 when a write watchpoint on this thread counts, ENODEV
// when it is accepted but counts nothing, else perf_event_open's errno.
int probe_hardware();

// Scheduler (capture_sched.cpp).
void sched_reset(uint64_t now_ns);
void end_all_windows(uint64_t now_ns);
uint64_t now_ns();

}  // namespace whymiss::soft::capture::detail
