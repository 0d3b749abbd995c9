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
#include <signal.h>
#include <ucontext.h>
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

// Software breakpoints (CaptureBackend::Int3, capture_int3.cpp). One patch per slot: the
// instruction of the slot's window with an int3 written over its first byte. `ctl` packs the
// window index (high half) with the patch state, so one load tells a handler both (window
// indices are never reused within a run, so a stale handler cannot mistake a later window of the
// slot for its own). Protocol, races and their reasoning: docs/soft-capture.md "Int3 backend".
enum : uint32_t { kPatchFree = 0, kPatchArmed = 1, kPatchFull = 2, kPatchClosed = 3 };
inline uint64_t pack_ctl(uint32_t window, uint32_t st) { return uint64_t(window) << 32 | st; }
inline uint32_t ctl_window(uint64_t c) { return uint32_t(c >> 32); }
inline uint32_t ctl_state(uint64_t c) { return uint32_t(c); }
inline constexpr int kSoftFd = int(kFdTable);  // Thread::fd marker: armed in an Int3 window
inline constexpr uint32_t kRecent = 64;        // ring of recently unpatched ips (stale traps)
inline constexpr uint32_t kCodeBytes = 16;

struct Patch {
  std::atomic<uint64_t> ctl{0};        // pack_ctl(window, kPatch*)
  std::atomic<uint64_t> ip{0};         // patched instruction (kept after the patch is freed)
  std::atomic<uint32_t> writers{0};    // handlers between their state check and their write
  std::atomic<uint32_t> stepping{0};   // threads stepping over the original instruction
  std::atomic<uint32_t> hits{0};       // int3 traps taken in the window (every thread)
  std::atomic<uint32_t> limit{0};      // hits after which the int3 is no longer re-inserted
  uint8_t code[kCodeBytes] = {};       // original bytes (code[0] is what the int3 replaced)
  uint8_t len = 0;                     // instruction length
  int prot = 0;                        // protection of the page before the window
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
  // Int3 backend (capture_int3.cpp). Outside the mapping: a forked child's handler needs the
  // patches after forget_after_fork, and a stale trap may arrive after a re-init.
  std::atomic<uint32_t> backend{0};  // profile::CaptureBackend
  pid_t pid = 0;                     // the process the patches belong to (getpid at init)
  // A page with MADV_WIPEONFORK holding 1 in the process that ran init: a forked child reads 0
  // without a syscall (fallback when madvise refuses: getpid() != pid).
  std::atomic<uint32_t>* alive = nullptr;
  std::atomic<uint32_t> gen{0};      // bumped by every init: per-thread caches (tid, fs) expire
  Patch patches[kMaxSlots];
  std::atomic<uint64_t> recent[kRecent] = {};  // ips unpatched lately (a trap may be late)
  uint32_t recent_next = 0;                    // tick/stop only
  std::atomic<uint32_t> child_restore{0};      // 0, 1: restoring, 2: done (forked child)
  std::atomic<uint64_t> sigtrap_owned{0}, int3_passed{0}, int3_bounces{0}, int3_stale{0};
  std::atomic<uint64_t> sigtrap_blocked{0};
  std::atomic<uint64_t> sigtrap_taken{0};  // ticks that found SIGTRAP no longer ours
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

// Int3 backend (capture_int3.cpp).
// Installs the SIGTRAP handler if SIGTRAP has the default disposition (or is ours already):
// 0, or EBUSY (counted in sigtrap_owned) when the program or a debugger owns it.
int int3_install();
// Checks the instruction at ip (decodable memory access, not pushf/popf), saves its bytes, makes
// its page writable and writes the int3: patch `slot` becomes window `w`. 0, or EINVAL when the
// instruction is refused (the caller counts it as rejected), EAGAIN when a thread has SIGTRAP
// blocked (counted in sigtrap_blocked), or mprotect's errno (counted).
int int3_patch(uint32_t slot, uint32_t w, uint64_t ip);
// Closes the slot's patch: no more re-insertion, waits for handlers mid-write (a few
// instructions), restores the original byte and the page's protection. Collector only.
void int3_unpatch(uint32_t slot);
// Restores every patched byte in a forked child (idempotent, any thread, signal-safe).
void int3_restore_in_child();
// Records an int3 hit of window w in the calling thread (capture.cpp): decoded from the saved
// original bytes, bounded per thread by captures_per_window. False if nothing was recorded.
bool int3_capture(uint32_t w, const uint8_t* code, uint8_t len, uint64_t ip, const ucontext_t* uc,
                  pid_t tid, uint64_t fs_base);
size_t int3_original_code(uint64_t ip, uint8_t* out, size_t max);
// Whether SIGTRAP is still handled by int3_on_sigtrap (the program may install its own later).
bool int3_handler_still_ours();
// Maps the fork-detection page (once) and marks this process as the patches' owner.
void int3_mark_owner();
// The SIGTRAP handler.
void int3_on_sigtrap(int sig, siginfo_t* si, void* ctx);

// Scheduler (capture_sched.cpp).
void sched_reset(uint64_t now_ns);
void end_all_windows(uint64_t now_ns);
uint64_t now_ns();

}  // namespace whymiss::soft::capture::detail
