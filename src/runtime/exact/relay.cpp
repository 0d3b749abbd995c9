// The relay thread and the waiting done by the threads that feed it (relay.h).
#include "runtime/exact/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/common/decimal.h"
#include "runtime/common/heap.h"
#include "runtime/common/own_thread.h"
#include "runtime/common/runtime_state.h"

namespace whymiss::rt::relay {

std::atomic<int> g_relay_sleeping{0};  // 1 while the relay sleeps (or is about to) in a futex
std::atomic<Lane*> g_solo{nullptr};
std::atomic<uint8_t> g_quiet{0};

namespace {

constexpr uint32_t kMaxLanes = 1u << 16;

struct State {
  Client client{};
  Knobs knobs{};
  std::atomic<bool> running{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  std::atomic<bool> abandon{false};
  std::atomic<bool> stalled{false};  // set before `done`: a solo owner never ended its access
  // Written by the relay before `done`: what leftover() counts from. Lanes stay mapped once the
  // relay is done (only it unmaps them), so their rings can be read then.
  uint64_t refused_retired = 0;  // refused pushes of the lanes it retired
  Lane** open = nullptr;         // the lanes it had not retired
  uint32_t nopen = 0;
  uint32_t seen = 0;  // s.lanes[seen..enrolled) enrolled after its last look
  // Lanes in enrolment order; the relay keeps its own dense list of the open ones.
  std::atomic<uint32_t> enrolled{0};
  std::atomic<Lane*> lanes[kMaxLanes] = {};
};
constinit State s;
thread_local bool t_is_relay __attribute__((tls_model("initial-exec"))) = false;

bool g_one_cpu = false;  // the process may run on one CPU only: spinning never helps
bool g_membarrier = false;  // registered: solo grants are possible
// A lane is granted solo once it alone has delivered for kSoloAfterUs of wall time (checked
// every kSoloCheckRounds rounds): the other threads exited, or have slept that long (a logger,
// an idle pool). Shorter waits would misplay threads that are about to run with it: a grant lets
// its owner run ~10x faster than the relay, and a thread released by the same barrier a few
// microseconds later would find it far ahead.
constexpr uint64_t kSoloAfterUs = 50 * 1000;
constexpr uint32_t kSoloCheckRounds = 4096;

// A program thread waiting in fence() for the relay to simulate its accesses: spins briefly,
// then yields, so that the other program threads get the cores (with more runnable threads than
// cores, a spinning thread would keep another one's ring dry, and the relay would have only some
// threads' accesses to interleave).
class Waiter {
 public:
  void wait() {
    if (g_relay_sleeping.load(std::memory_order_relaxed)) wake();
    if (g_one_cpu || ++n_ > kSpins) sched_yield();
    else __builtin_ia32_pause();
  }

 private:
  static constexpr unsigned kSpins = 64;
  unsigned n_ = 0;
};

// A record of `lane` is done: if the relay published room and the owner sleeps on a full ring,
// wake it once half the ring is free (it refills long before the relay could drain the rest).
void finished_one(Lane* lane) {
  if (!lane->ring->done() || lane->sleeping.load(std::memory_order_seq_cst) == 0) return;
  if (lane->ring->produced() - lane->ring->consumed() > AccessRing::kSlots / 2) return;
  if (lane->sleeping.exchange(0, std::memory_order_acq_rel) != 0)
    futex(&lane->sleeping, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

uint64_t now_us() { return monotonic_ns() / 1000u; }

// Time waited, counted in steps of at most `cap` between looks (`last_us`: the previous look, 0
// before the first), so that the relay's own time off the CPU (a loaded machine, a stopped
// process) does not count as the other side's.
void count_wait(uint64_t* waited_us, uint64_t* last_us, uint64_t cap) {
  const uint64_t now = now_us();
  if (*last_us != 0) *waited_us += now - *last_us < cap ? now - *last_us : cap;
  *last_us = now;
}

void retire(Lane* lane) {
  s.refused_retired += lane->refused.load(std::memory_order_relaxed);  // final: closing is set
  s.client.retire(lane->owner);
  lane->retired = true;  // the Lane itself lives on (in the owner's never-freed state)
  munmap(lane->ring, sizeof(AccessRing));
}

// Whether lane `id` has had its first `pos` records simulated (a retired lane has had all).
bool reached(uint32_t id, uint64_t pos) {
  if (id >= kMaxLanes) return true;  // not a lane: nothing to wait for
  Lane* target = s.lanes[id].load(std::memory_order_acquire);
  if (target == nullptr) return false;  // enrolment in progress: it has pushed nothing yet
  if (target->retired) return true;
  // A lane held at a marker has popped it, but is not past it: what that marker waits for comes
  // before anything after it (the order is transitive only so).
  return target->ring->popped() - (target->blocked ? 1 : 0) >= pos;
}

// The lane's next access, past any markers whose positions have been reached. False when its
// ring is empty or it is held at a marker (lane->blocked). A hold ends when the position is
// reached, after kMaxDependencyWaitUs, or, while the relay stops, when no lane can move on
// otherwise (release_holds).
bool next_access(Lane* lane, AccessRecord* r) {
  for (;;) {
    if (lane->blocked) {
      if (!reached(lane->dep_id, lane->dep_pos)) {
        count_wait(&lane->blocked_waited_us, &lane->blocked_since_us, kDependencyStepUs);
        if (lane->blocked_waited_us < kMaxDependencyWaitUs) return false;
      }
      lane->blocked = false;
    }
    if (!lane->ring->pop(r)) return false;
    if (!is_marker(*r)) return true;
    if (uint32_t(r->ip) == lane->id || reached(uint32_t(r->ip), r->addr)) continue;
    lane->blocked = true;
    lane->dep_id = uint32_t(r->ip);
    lane->dep_pos = r->addr;
    lane->blocked_since_us = 0;
    lane->blocked_waited_us = 0;
  }
}


// A live lane that runs dry is waited for while its thread is runnable (waiting for a core, as
// its accesses are simulated as if it had one), for at most kLiveWaitUs; a thread that is
// asleep (blocked in a lock, a join, a read) is not waited for: the others run on meanwhile, as
// they would on separate cores.
constexpr uint64_t kLiveWaitUs = 1000;
constexpr uint64_t kStateCheckUs = 20;  // a first look after this long, then this often * 4

// Whether the lane's thread is running or runnable ('R' in /proc/self/task/TID/stat). A thread
// that is gone (it exited without closing its lane, e.g. by a raw SYS_exit) is not. Unknown (no
// /proc) counts as runnable: the waits stay bounded, and back off (see round). The file is opened
// per look, not kept: held fds would count against the program's limit, and a program that
// closes fds it does not own could hand the number to something else.
bool runnable(Lane* lane) { return thread_runnable(lane->tid); }

}  // namespace

bool thread_runnable(int tid) noexcept {
  // The path by hand and the file by system calls: program threads call this too (pacing in
  // parallel mode), where libc's open/read/close are cancellation points and snprintf is not
  // async-signal-safe.
  char path[48] = "/proc/self/task/";
  size_t len = sizeof "/proc/self/task/" - 1;
  len += put_decimal(path + len, unsigned(tid));
  std::memcpy(path + len, "/stat", sizeof "/stat");
  const long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT && errno != ESRCH;
  char buf[256];
  const long n = syscall(SYS_read, int(fd), buf, sizeof buf - 1);
  const int err = errno;
  syscall(SYS_close, int(fd));
  if (n <= 0) return err != ESRCH;
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');  // the command name may contain anything but ends there
  return p == nullptr || p[1] != ' ' || p[2] == 'R';
}

namespace {

// The relay's clock for its waits and back-offs (20 us and up). Asked once per round for every
// lane that did not deliver (worth_waiting: a main thread blocked in a join, every round) and at
// the start of every wait, while a round simulates one access per live lane: read from the
// system each time (a vDSO call, tens of ns in a VM), it was 19 % of the relay's time on zstd
// -T2. Read once per kClockRounds rounds, whenever a wait reads it (a wait past its first
// spins) and before every look at a thread's state (three system calls anyway), and again at the
// first round after the relay did something else (a solo loan, a revocation, a sleep): so
// between reads it falls behind by at most kClockRounds rounds, and a clock behind only makes
// worth_waiting skip a dry lane a little longer (fewer waits, never longer ones; no wait that
// order depends on uses it). Relay thread only.
constexpr uint32_t kClockRounds = 16;
struct RoundClock {
  uint64_t us = 0;
  uint32_t rounds = 0;
  void round() {
    if (rounds++ % kClockRounds == 0) us = now_us();
  }
  uint64_t read() { return us = now_us(); }
  void stale() { rounds = 0; }  // the next round reads it
};
RoundClock g_round_clock;

// Waits (giving the core away) for the live lane's next access; false when it stays dry.
bool wait_for(Lane* lane, AccessRecord* r) {
  lane->ring->publish();  // its thread may be waiting for room
  uint64_t start = 0, next_check = 0;  // from the end of the first spins (most waits end there)
  for (unsigned n = 0;; ++n) {
    if (next_access(lane, r)) return true;
    if (lane->blocked || lane->closing.load(std::memory_order_acquire) ||
        s.stop.load(std::memory_order_relaxed) ||
        lane->local.load(std::memory_order_relaxed))
      return false;
    if (n < 32) {
      __builtin_ia32_pause();
      continue;
    }
    const uint64_t now = g_round_clock.read();
    if (n == 32) {
      start = now;
      next_check = now + kStateCheckUs;
    }
    if (now >= start + kLiveWaitUs) return false;
    if (now >= next_check) {
      if (!runnable(lane)) return next_access(lane, r);  // (it may have pushed, then slept)
      next_check = now + 4 * kStateCheckUs;
    }
    sched_yield();
  }
}

// Whether to wait for a dry lane: yes if it delivered in its last round (its thread is most likely
// between two accesses or waiting for a core), else if its thread is runnable (it has work but
// no core yet: e.g. released from a barrier together with a thread that already runs). A thread
// found asleep is not looked at again for kAsleepRecheckUs, doubling up to kAsleepRecheckMaxUs
// while it stays asleep, so a blocked thread costs a /proc read per period, not a wait per round,
// and one blocked for long (a main thread in pthread_join) one read (three system calls) per
// 1.6 ms instead of per 0.2 ms: true_sharing made 467 instead of 3,103 opens.
constexpr uint64_t kAsleepRecheckUs = 200;
constexpr uint64_t kAsleepRecheckMaxUs = 1600;

// The next period of a doubling back-off: `first` after none, else twice `last`, at most `cap`.
uint64_t next_backoff(uint64_t last, uint64_t first, uint64_t cap) {
  return last == 0 ? first : last < cap / 2 ? 2 * last : cap;
}

bool worth_waiting(Lane* lane) {
  if (lane->local.load(std::memory_order_relaxed)) return false;
  if (lane->live) return true;
  if (g_round_clock.us < lane->asleep_until_us) return false;
  const uint64_t now = g_round_clock.read();
  if (now < lane->asleep_until_us) return false;
  if (runnable(lane)) {
    lane->asleep_backoff_us = 0;
    return true;
  }
  lane->asleep_backoff_us =
      next_backoff(lane->asleep_backoff_us, kAsleepRecheckUs, kAsleepRecheckMaxUs);
  lane->asleep_until_us = now + lane->asleep_backoff_us;
  return false;
}

// The relay is about to simulate a record: a push that raced with its last look (see settle) may
// have left quiet() set.
inline void not_quiet() { store_if_changed(g_quiet, uint8_t{0}); }

// One pass: the next access of every open lane, in turn. Returns whether any was simulated.
// A lane stays live while it delivers; a live lane that runs dry is waited for (wait_for) while
// another lane has work, so that threads interleave access by access as on separate cores.
bool round(Lane** open, uint32_t* nopen, Lane** only) {
  bool any = false;
  uint32_t delivered = 0;
  g_round_clock.round();
  for (uint32_t i = 0; i < *nopen;) {
    Lane* lane = open[i];
    AccessRecord r;
    bool waited = false;
    if (next_access(lane, &r) ||
        (*nopen > 1 && !lane->blocked && worth_waiting(lane) && (waited = true) &&
         wait_for(lane, &r))) {
      lane->live = true;
      lane->backoff_us = 0;
      lane->asleep_backoff_us = 0;
      not_quiet();
      s.client.simulate(lane->owner, r);
      finished_one(lane);
      any = true;
      *only = ++delivered == 1 ? lane : nullptr;
      ++i;
      continue;
    }
    if (lane->blocked) {  // not dry: held back until another lane catches up
      ++i;
      continue;
    }
    lane->live = false;
    if (waited && !lane->local.load(std::memory_order_relaxed)) {
      // Runnable (or unknown) but dry for a whole wait: busy outside instrumented code, or not
      // readable. Skip it for a while, longer each time, so it costs a fraction of a wait per
      // round instead of a wait per round.
      lane->backoff_us = next_backoff(lane->backoff_us, kLiveWaitUs, 64000);
      lane->asleep_until_us = g_round_clock.us + lane->backoff_us;
    }
    lane->ring->publish();
    // closing is stored after the owner's last push: seeing it, an empty ring stays empty.
    if (lane->closing.load(std::memory_order_acquire) && !lane->ring->pending()) {
      retire(lane);
      open[i] = open[--*nopen];
      continue;
    }
    ++i;
  }
  return any;
}

// Whether a lane other than `except` (nullptr: any) has work for the simulator, or a thread
// arrived.
bool others_pending(Lane** open, uint32_t nopen, uint32_t seen, Lane* except) {
  if (s.enrolled.load(std::memory_order_acquire) != seen) return true;
  for (uint32_t i = 0; i < nopen; ++i) {
    if (open[i] == except) continue;
    if (open[i]->ring->pending() || open[i]->closing.load(std::memory_order_acquire)) return true;
  }
  return false;
}

// Nothing was left in a pass: sets quiet() unless a ring filled meanwhile. A push that lands
// between the look and the store is found by the look after it (the store is a full barrier),
// or, if its owner's store of the record was still on its way, by the next pass (not_quiet).
void settle(Lane** open, uint32_t nopen, uint32_t seen) {
  if (g_quiet.load(std::memory_order_relaxed)) return;
  g_quiet.store(1, std::memory_order_seq_cst);
  if (others_pending(open, nopen, seen, nullptr)) g_quiet.store(0, std::memory_order_relaxed);
}

// Stopping, a pass simulated nothing: every lane with records left is held at a marker whose
// position no pass can reach any more (a cycle through a misnamed position, or a lane not yet
// seen). Ends those holds, so that the drain finishes; returns whether there were any. Holds are
// not simply dropped at stop(): the program's last threads often end faster than a lagging relay
// (a loaded machine), and most of their accesses are then simulated while stopping, where an
// order given up is a wrong answer (a consumer's reads before the writes it joined).
bool release_holds(Lane** open, uint32_t nopen) {
  bool any = false;
  for (uint32_t i = 0; i < nopen; ++i) {
    if (!open[i]->blocked) continue;
    open[i]->blocked = false;
    any = true;
  }
  return any;
}

// How long a solo owner may stay inside one inline access before the relay gives up for good.
// An access takes microseconds; one that lasts this long was interrupted by something that may
// wait for another program thread, which may in turn wait for the relay (a full ring): a
// deadlock the relay breaks by stopping. Time is counted in steps of at most kRevokeStepUs, so
// that a stop of the whole process (SIGSTOP, a debugger) does not count as the owner's.
constexpr uint64_t kRevokeLimitUs = 1000 * 1000;
constexpr uint64_t kRevokeStepUs = 50 * 1000;

// Takes the simulator back from a solo owner. After the membarrier, an owner access that did not
// see the grant cleared has its busy flag visible here; waiting for it to clear ends that access.
// False when abandoned, or stalled (s.stalled set): the access may still be running, so the
// relay must not touch the simulator again.
bool revoke(Lane* lane) {
  g_solo.store(nullptr, std::memory_order_seq_cst);
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  uint64_t waited_us = 0, last_us = 0;
  for (unsigned n = 0; lane->busy.load(std::memory_order_acquire) != 0; ++n) {
    if (s.abandon.load(std::memory_order_acquire)) return false;
    if (n < 256) {
      __builtin_ia32_pause();
      continue;
    }
    if (n % 16 == 0) {  // a clock read per 16 yields
      count_wait(&waited_us, &last_us, kRevokeStepUs);
      if (waited_us >= kRevokeLimitUs) {
        s.stalled.store(true, std::memory_order_release);
        return false;
      }
    }
    sched_yield();
  }
  return true;
}

void* relay_main(void*) {
  t_is_relay = true;
  set_in_runtime(true);  // anything this thread allocates is the runtime's own
  settle_own_thread("whymiss-relay", s.knobs.nice);
  auto** open = static_cast<Lane**>(private_alloc(sizeof(Lane*) * kMaxLanes));
  if (open == nullptr) {
    s.done.store(true, std::memory_order_release);
    return nullptr;
  }
  uint32_t nopen = 0, seen = 0;
  Lane* sole = nullptr;  // the lane that alone delivered in every round since sole_since_us
  uint32_t sole_rounds = 0;
  uint64_t sole_since_us = 0;
  for (unsigned idle = 0;;) {
    if (s.abandon.load(std::memory_order_acquire)) break;
    // Read before the rings are: the pushes that came before stop() (its caller's last ones
    // included) are then seen below, so an empty pass after it really means nothing is left.
    const bool stopping = s.stop.load(std::memory_order_seq_cst);
    const uint32_t n = s.enrolled.load(std::memory_order_acquire);
    while (seen < n) {
      Lane* lane = s.lanes[seen].load(std::memory_order_acquire);
      if (lane == nullptr) break;  // enrolled but not yet stored: next time
      open[nopen++] = lane;
      ++seen;
    }
    if (Lane* lent = g_solo.load(std::memory_order_relaxed)) {
      g_round_clock.stale();  // rounds resume after the loan, maybe much later
      // Lent out: only the owner's own earlier pushes are simulated here, until anything else
      // needs the simulator.
      // A lane held at a marker is taken back too: its owner must not run ahead inline of what
      // the marker waits for.
      if (s.stop.load(std::memory_order_acquire) || lent->closing.load(std::memory_order_acquire) ||
          lent->blocked || others_pending(open, nopen, seen, lent)) {
        if (!revoke(lent)) break;  // abandoned or stalled
        sole = nullptr;
        sole_rounds = 0;
        continue;
      }
      AccessRecord r;
      if (next_access(lent, &r)) {
        not_quiet();
        s.client.simulate(lent->owner, r);
        finished_one(lent);
        idle = 0;
        continue;
      }
      if (lent->blocked) continue;  // (taken back above)
      lent->ring->publish();  // the owner waits for this before simulating inline
    } else {
      Lane* only = nullptr;
      if (round(open, &nopen, &only)) {
        idle = 0;
        if (only != nullptr && only == sole) {
          if (++sole_rounds % kSoloCheckRounds == 0 && g_membarrier &&
              !s.stop.load(std::memory_order_relaxed) && now_us() - sole_since_us >= kSoloAfterUs) {
            g_solo.store(only, std::memory_order_release);
            sole_rounds = 0;
          }
        } else {
          sole = only;  // nullptr when several lanes delivered
          sole_rounds = 0;
          if (sole != nullptr) sole_since_us = now_us();
        }
        continue;
      }
    }
    // Every ring was empty in a pass that began after stop(), or all that is left is held back.
    if (stopping) {
      if (release_holds(open, nopen)) continue;
      break;
    }
    settle(open, nopen, seen);
    // Quiet, the threads take held hits and push only on a miss: the relay then sleeps almost at
    // once, as the core it would spin on is better used by the program (and left idle, the
    // kernel moves a waiting thread onto it; with the relay spinning there, a thread woken behind
    // another one could wait milliseconds for a core, and threads that should contend ran one
    // after the other).
    const unsigned spins = quiet() ? 8 : 256;
    if (++idle < spins) {
      __builtin_ia32_pause();
      continue;
    }
    if (idle < 2 * spins) {  // the program's threads may be waiting for a core: give them ours
      sched_yield();
      g_round_clock.stale();
      continue;
    }
    // Sleep until a push wakes us; the timeout covers a wake-up lost to the unfenced check in
    // push() (the producer's store of its head and its load of the flag may pass each other).
    // With no lane at all (parallel mode's relay, parked until threads move to it) nothing can
    // push: only open_lane and stop wake it, and both do, so it sleeps 100 ms at a time instead
    // of waking every 2 ms beside a program that runs without it.
    g_relay_sleeping.store(1, std::memory_order_seq_cst);
    if (!others_pending(open, nopen, seen, nullptr) && !s.stop.load(std::memory_order_seq_cst)) {
      const bool none = nopen == 0 && s.enrolled.load(std::memory_order_seq_cst) == 0;
      const timespec ts{0, (none ? 100 : 2) * 1000 * 1000};
      futex(&g_relay_sleeping, FUTEX_WAIT_PRIVATE, 1, &ts);
    }
    g_relay_sleeping.store(0, std::memory_order_relaxed);
    g_round_clock.stale();
    idle = 0;
  }
  for (uint32_t i = 0; i < nopen; ++i) open[i]->ring->publish();  // consumed() = simulated
  s.open = open;
  s.nopen = nopen;
  s.seen = seen;
  s.done.store(true, std::memory_order_release);
  return nullptr;
}

}  // namespace

bool start(const Client& c, const Knobs& k) noexcept {
  if (s.running.load(std::memory_order_relaxed)) return true;
  s.client = c;
  s.knobs = k;
  cpu_set_t cpus;
  g_one_cpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) <= 1;
  g_membarrier = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  const bool ok = start_own_thread(relay_main);  // (not counted as a program thread; no signals)
  s.running.store(ok, std::memory_order_release);
  return ok;
}

bool running() noexcept { return s.running.load(std::memory_order_acquire); }
bool on_relay_thread() noexcept { return t_is_relay; }

bool open_lane(Lane* lane, void* owner, int tid) noexcept {
  void* mem = mmap(nullptr, sizeof(AccessRing), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  // A refused thread takes no index: the relay waits for every index below `enrolled` to be
  // stored, and reads lanes[] up to it.
  const uint32_t limit = s.knobs.max_lanes < kMaxLanes ? s.knobs.max_lanes : kMaxLanes;
  uint32_t i = s.enrolled.load(std::memory_order_acquire);
  do {
    if (i >= limit) {
      munmap(mem, sizeof(AccessRing));
      return false;
    }
  } while (!s.enrolled.compare_exchange_weak(i, i + 1, std::memory_order_acq_rel,
                                             std::memory_order_acquire));
  lane->ring = new (mem) AccessRing;
  lane->id = i;
  lane->owner = owner;
  lane->tid = tid;
  s.lanes[i].store(lane, std::memory_order_release);
  wake();
  return true;
}

void close_lane(Lane* lane) noexcept {
  lane->closing.store(true, std::memory_order_release);
  wake();
}

void wake() noexcept {
  if (g_relay_sleeping.exchange(0, std::memory_order_acq_rel) != 0)
    futex(&g_relay_sleeping, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

// A full ring: spin briefly, then sleep until the relay has drained half of it (finished_one)
// or 1 ms has passed. Sleeping, not yielding: with more busy threads than cores, yielding
// producers took ~40% of the CPU from the relay. The ring stays full meanwhile, so the relay
// never finds this lane dry on account of the sleep.
void push_slow(Lane* lane, const AccessRecord& r) noexcept {
  const int saved = errno;
  for (unsigned n = 0; !lane->ring->push(r); ++n) {
    if (!recording() || s.done.load(std::memory_order_relaxed)) {  // nobody will make room
      lane->refused.store(lane->refused.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
      break;
    }
    if (g_relay_sleeping.load(std::memory_order_relaxed)) wake();
    if (n < 64) {
      __builtin_ia32_pause();
      continue;
    }
    lane->sleeping.store(1, std::memory_order_seq_cst);
    if (lane->ring->push(r)) {  // room appeared meanwhile (the relay may not have seen the flag)
      lane->sleeping.store(0, std::memory_order_relaxed);
      break;
    }
    const timespec ts{0, 1000 * 1000};
    futex(&lane->sleeping, FUTEX_WAIT_PRIVATE, 1, &ts);
    lane->sleeping.store(0, std::memory_order_relaxed);
  }
  if (g_relay_sleeping.load(std::memory_order_relaxed)) wake();
  errno = saved;
}

bool fence(Lane* lane) noexcept {
  const uint64_t want = lane->ring->produced();
  if (lane->ring->consumed() >= want) return true;
  const int saved = errno;
  Waiter w;
  while (lane->ring->consumed() < want) {
    if (!recording() || s.done.load(std::memory_order_relaxed)) break;
    w.wait();
  }
  errno = saved;
  return lane->ring->consumed() >= want;
}

bool await_quiet(Lane* lane) noexcept {
  store_if_changed(lane->local, uint8_t{1});
  const int saved = errno;
  Waiter w;
  bool ok = false;
  // Long enough for a relay that only has this thread's last pushes to finish (a ring of hits
  // takes ~100 us) or has to wake up; too short to wait out another thread's stream.
  constexpr uint64_t kLimitUs = 200;
  uint64_t until = 0;
  for (unsigned n = 0;; ++n) {
    if (quiet() && (lane->ring->drained() || lane->ring->look())) {
      ok = true;
      break;
    }
    if (!recording() || s.done.load(std::memory_order_relaxed)) break;
    if (n % 16 == 0) {  // a clock read per 16 waits
      const uint64_t now = now_us();
      if (until == 0) until = now + kLimitUs;
      else if (now >= until) break;
    }
    w.wait();
  }
  errno = saved;
  return ok;
}

void abandon() noexcept {
  s.abandon.store(true, std::memory_order_release);
  s.stop.store(true, std::memory_order_release);
  wake();
}

bool stalled() noexcept { return s.stalled.load(std::memory_order_acquire); }

namespace {
uint64_t unsimulated(Lane* lane) {
  return lane->ring->produced() - lane->ring->consumed() +
         lane->refused.load(std::memory_order_relaxed);
}
}  // namespace

uint64_t leftover() noexcept {
  if (!s.done.load(std::memory_order_acquire)) return 0;
  uint64_t n = s.refused_retired;
  for (uint32_t i = 0; i < s.nopen; ++i) n += unsimulated(s.open[i]);
  const uint32_t enrolled = s.enrolled.load(std::memory_order_acquire);
  for (uint32_t i = s.seen; i < enrolled && i < kMaxLanes; ++i) {
    // (nullptr: enrolment in progress, so nothing pushed yet)
    if (Lane* lane = s.lanes[i].load(std::memory_order_acquire)) n += unsimulated(lane);
  }
  return n;
}

bool stop(unsigned timeout_ms) noexcept {
  if (!running()) return true;
  s.stop.store(true, std::memory_order_seq_cst);
  const int saved = errno;
  const timespec step{0, 100 * 1000};
  for (unsigned waited_us = 0; !s.done.load(std::memory_order_acquire); waited_us += 100) {
    if (waited_us >= timeout_ms * 1000u) break;
    wake();
    syscall(SYS_nanosleep, &step, nullptr);  // (not libc's: a cancellation point in an exit)
  }
  errno = saved;
  return s.done.load(std::memory_order_acquire);
}

}  // namespace whymiss::rt::relay
