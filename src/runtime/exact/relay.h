// The relay: how exact mode simulates a multi-threaded program. Each program thread pushes its
// accesses into its own ring (access_ring.h); one relay thread takes them one at a time from every
// ring in turn and feeds the simulator, which therefore never needs a lock.
//
// Why: simulating on the program's threads under fair locks made two threads contending for a
// line hand a lock over on every access (a cross-core round trip of several host cache lines,
// ~1 us each). Taking one access from each busy ring in turn gives the same access-by-access
// interleaving, deterministically, and the program's threads only write to memory of their own.
//
// Solo: when only one lane has delivered for a while (the other threads exited or sleep), the
// relay lends the simulator to that lane's owner, which then simulates its own accesses inline,
// as a single-threaded program does, instead of streaming them across cores (3-4x slower). The
// owner checks solo() on every access with its lane's `busy` set; the relay takes the simulator
// back, as soon as another lane has work or the relay must stop, by clearing the grant, a
// membarrier, and waiting for `busy` to clear (so it needs no fence on the owner's side).
//
// Stall: an owner stopped inside an inline access (e.g. by a signal handler that waits for a
// thread blocked on a full ring) would make that wait endless. After 1 s the relay gives up for
// good: it stops (stalled() and done), never touches the simulator again, and pushes and fences
// no longer wait; leftover() counts what was never simulated.
//
// Order between threads: the round-robin by itself ignores synchronisation. A thread B that
// acquires what thread A released (an atomic flag, a new thread's start) may have A's earlier
// accesses still queued behind many others in A's ring while its own next ones come up first:
// B's read of data A wrote would then be simulated before A's write. So B pushes a marker
// (depend()): "A's first `pos` records before any more of mine". The relay holds B's lane back
// at a marker until it has simulated that much of A's ring (or A's lane is retired; while the
// relay stops, also once no lane could move on otherwise). A marker only ever names a position A had already reached when B read it, in real
// time, so no two lanes can wait for each other; a hold longer than kMaxDependencyWaitUs (the
// relay's own time off the CPU not counted) is given up all the same, so that a misnamed
// position could cost order, never progress.
//
// Contract: start() is called by the only thread the program has (or before other threads
// record), never from an access (it looks up and calls pthread_create); in parallel mode it starts
// the relay idle, and threads enrol (open_lane) later, each from a point between two accesses of
// its own. lane functions are called by the lane's owner thread; fence() and push() may wait
// (spinning, then yielding, then sleeping in 50 us steps) but give up as soon as recording()
// turns false or the relay is done (stopped, abandoned or stalled). The relay thread runs with
// every signal blocked, allocates only from the private heap, and calls the client's callbacks
// with the lane's owner pointer.
#pragma once
#include <atomic>
#include <cstdint>

#include "runtime/exact/access_ring.h"

namespace whymiss::rt::relay {

struct Lane {
  AccessRing* ring = nullptr;       // mmap'ed by open_lane
  uint32_t id = 0;                  // enrolment number, set by open_lane (never reused)
  std::atomic<bool> closing{false};  // the owner has exited: no more pushes
  void* owner = nullptr;            // handed to the client callbacks
  int tid = 0;                      // the owner's kernel thread id
  std::atomic<uint8_t> busy{0};     // owner: set around an access it simulates inline (solo)
  std::atomic<int> sleeping{0};     // owner: asleep (futex) on a full ring until the relay drains
                                    // half of it
  std::atomic<uint64_t> refused{0};  // owner: pushes given up on (a full ring nobody drains)
  std::atomic<uint8_t> local{0};     // owner: took a held hit (hit_path.h) or waits for quiet
                                     // since its last push: the relay need not wait for it
  // The relay's own bookkeeping, on a host line of its own: it changes on every delivery, and the
  // owner reads the fields above on every access.
  alignas(64) bool live = false;    // relay thread only: delivered in its last round
  // Written by the client's simulate() on the relay thread, read by the owner: how many of the
  // owner's last simulated accesses in a row were hits on the line it touched last, i.e. could
  // have been held hits (hit_path.h) had it not been waiting for the relay.
  std::atomic<uint32_t> hit_run{0};
  uint64_t last_line = ~uint64_t(0);  // relay thread only (client): the line hit_run is about
  uint64_t asleep_until_us = 0;     // relay thread only: not waited for before this
  uint64_t backoff_us = 0;          // relay thread only: the next wait that finds it dry skips it
                                    // this long (doubling while it stays dry)
  uint64_t asleep_backoff_us = 0;   // relay thread only: how long a thread found asleep is not
                                    // looked at again (doubling while it stays asleep)
  // Relay thread only: the marker this lane is held at (see "Order between threads").
  bool blocked = false;
  bool retired = false;             // its ring is unmapped: every record of it was simulated
  uint32_t dep_id = 0;
  uint64_t dep_pos = 0;
  uint64_t blocked_since_us = 0;    // last look at the hold (0: none yet; see count_wait)
  uint64_t blocked_waited_us = 0;   // how long it has been held, in capped steps
};

// A marker's fields in an AccessRecord (size 0 never occurs for an access).
constexpr uint32_t kMarkerDepends = 1;
inline bool is_marker(const AccessRecord& r) noexcept { return r.size == 0; }
constexpr uint64_t kMaxDependencyWaitUs = 200 * 1000;
constexpr uint64_t kDependencyStepUs = 1000;

struct Client {
  void (*simulate)(void* owner, const AccessRecord& r);  // on the relay thread
  void (*retire)(void* owner);  // lane closed and drained; its ring is unmapped afterwards
};

// How the relay thread runs (runtime.cpp fills it from the environment).
struct Knobs {
  // Added to the relay thread's nice (0-19; WHYMISS_RELAY_NICE). With fewer host cores than
  // program threads + 1, a relay at the program's own priority keeps a core while a program
  // thread that woke (a mutex handed over, a ring drained) waits for one, so the program's
  // threads take turns instead of overlapping as they do natively, and a contended mutex changes
  // hands ~5x less often (bench/README.md, "The relay's priority"). A higher nice lets woken
  // threads take the relay's core; the price is a relay that other busy threads (the program's
  // miss-ratio worker, other processes of its session) can starve, and an unprivileged thread
  // cannot lower its nice again, so it is opt-in.
  int nice = 0;
  // Lanes a run may open (WHYMISS_MAX_LANES, for tests of what happens when none is left;
  // capped at the relay's own 65,536).
  uint32_t max_lanes = ~uint32_t(0);
};

// Starts the relay thread (named "whymiss-relay"). False (and nothing started) when it cannot.
bool start(const Client& c, const Knobs& k = {}) noexcept;
bool running() noexcept;
bool on_relay_thread() noexcept;

// Whether kernel thread `tid` of this process is running or runnable ('R' in
// /proc/self/task/TID/stat): a thread that is gone is not, an unknown state (no /proc) counts as
// runnable. Three system calls, made directly (no cancellation point, async-signal-safe); errno
// may change.
bool thread_runnable(int tid) noexcept;

// Maps the lane's ring and enrolls it; false when out of memory or lanes.
bool open_lane(Lane* lane, void* owner, int tid) noexcept;
// The owner is exiting: the relay retires the lane once it has simulated everything in it.
void close_lane(Lane* lane) noexcept;

// Owner thread: hands one access over, waiting while the ring is full. Preserves errno.
inline void push(Lane* lane, const AccessRecord& r) noexcept;
// Whether the relay had simulated everything pushed into any ring when it last looked: it sets
// this after finding every ring empty, and a push clears it (so does the relay, on taking a
// record, for a push that raced with its look). While set, a thread whose own ring is drained
// may take held hits (hit_path.h): they come after every access queued anywhere.
inline bool quiet() noexcept;
// Owner thread: waits a little (spinning, then yielding) for quiet() with its own ring drained.
// Marks the lane `local` first, so that the relay does not wait for its next push meanwhile.
// False when it did not come (another thread keeps the relay busy) or recording stopped.
// Preserves errno.
bool await_quiet(Lane* lane) noexcept;
// Owner thread: its lane's next accesses are simulated only after the first `pos` records of
// lane `id` (a position that lane had reached, e.g. read from a release; see "Order between
// threads"). Pushes a marker, waiting like push() when the ring is full.
inline void depend(Lane* lane, uint32_t id, uint64_t pos) noexcept;

// Owner thread: waits until every access it pushed has been simulated (before its heap objects
// change identity, so that each access is charged to the object it touched). Preserves errno.
// Returns false when it gave up (recording stopped) with accesses still unsimulated.
bool fence(Lane* lane) noexcept;

// Drains every ring and stops the relay thread; waits at most timeout_ms. Returns whether the
// relay stopped (false: it is still running, e.g. blocked on a lock a crashed thread held).
bool stop(unsigned timeout_ms) noexcept;
// Stops the relay without simulating anything more: for a finish() that interrupted the calling
// thread's own inline (solo) access, which the relay would otherwise wait for forever. Returns
// at once; the relay leaves the simulator alone from then on.
void abandon() noexcept;
// The relay gave up on a solo owner that stayed inside an inline access (see Stall); it is
// done, as after stop(), and stop() returns true at once.
bool stalled() noexcept;
// After stop() returned true (or stalled()) and recording stopped, also after abandon(): accesses
// pushed but never simulated, left in the rings or refused by a full ring. 0 while the relay is
// not done.
uint64_t leftover() noexcept;

// ---- inline parts ----
// Stores `v` unless `a` already holds it. For the flags and counts one thread writes and another
// reads on its hot path: a store of an unchanged value would still take the host line away from
// the reader's cache.
template <typename T>
inline void store_if_changed(std::atomic<T>& a, T v) noexcept {
  if (a.load(std::memory_order_relaxed) != v) a.store(v, std::memory_order_relaxed);
}
void push_slow(Lane* lane, const AccessRecord& r) noexcept;
void wake() noexcept;
extern std::atomic<int> g_relay_sleeping;
extern std::atomic<Lane*> g_solo;
extern std::atomic<uint8_t> g_quiet;

// The lane whose owner may simulate inline, or nullptr. The owner reads it with lane->busy set
// (and a compiler barrier between): a grant it sees then is not revoked until busy clears. It
// may simulate inline only once everything it pushed is simulated (ring empty: see fence()).
inline Lane* solo() noexcept { return g_solo.load(std::memory_order_relaxed); }

inline bool quiet() noexcept { return g_quiet.load(std::memory_order_relaxed) != 0; }

inline void push(Lane* lane, const AccessRecord& r) noexcept {
  if (!lane->ring->push(r)) return push_slow(lane, r);  // full: the relay is not quiet
  store_if_changed(g_quiet, uint8_t{0});
  if (g_relay_sleeping.load(std::memory_order_relaxed)) wake();
}

inline void depend(Lane* lane, uint32_t id, uint64_t pos) noexcept {
  push(lane, AccessRecord{uint64_t(id), pos, 0, kMarkerDepends});
}

}  // namespace whymiss::rt::relay
