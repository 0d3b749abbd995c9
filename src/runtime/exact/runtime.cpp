// The exact-mode runtime core: every instrumented access goes through the simulator and is
// attributed to its instruction, its heap object and (for sharing misses) its cache line.
//
// Configured by the environment (set by `whymiss record`): WHYMISS_OUTPUT (profile path; unset =
// the runtime stays off and the program runs normally), WHYMISS_CACHE, WHYMISS_CORES (0 = one
// simulated core per thread), WHYMISS_POLICY, WHYMISS_LLC, WHYMISS_PROGRESS (a page to publish
// progress in, model/progress.h). The profile is written at exit, from
// exit() in any thread, and from fatal or terminating signals whose disposition was the default.
// A forked child is left alone (it runs unprofiled). Nothing here may throw, allocate from the
// program's heap, or change errno as seen by the program.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "model/host_memory.h"
#include "model/profile.h"
#include "model/progress.h"
#include "runtime/common/heap.h"
#include "runtime/common/inside.h"
#include "runtime/common/run_env.h"
#include "runtime/common/profile_strings.h"
#include "runtime/common/runtime_state.h"
#include "runtime/common/signal_guard.h"
#include "runtime/common/tables.h"
#include "runtime/exact/access_sink.h"
#include "runtime/exact/cpu_sampler.h"
#include "runtime/exact/dataflow.h"
#include "runtime/exact/spatial.h"
#include "runtime/exact/hit_path.h"
#include "runtime/exact/relay.h"
#include "runtime/exact/reuse.h"
#include "runtime/exact/access_log.h"
#include "runtime/exact/thread_order.h"
#include "sim/sim.h"

namespace whymiss::rt {

constinit thread_local HitPath t_hit __attribute__((tls_model("initial-exec")));
std::atomic<bool> g_held_hits{false};

namespace {

using profile::InstructionRecord;
using profile::LineRecord;
using sim::Outcome;

constexpr uint32_t kMaxThreads = 1u << 16;
constexpr uint32_t kMaxCores = 1024;
enum State : int { kOff = 0, kInitialising, kRecording, kFinished, kDisabled };

struct ThreadState {
  uint32_t index, tid, core;
  // Up while this thread simulates an access (record() from access(), parallel_access) or takes
  // a held or parallel hit: the finisher waits for it to clear.
  std::atomic<uint8_t> busy{0};
  int* errno_loc = nullptr;      // this thread's errno: saved and restored without libc calls
  // Non-null while the simulator runs without locks (the process has this one thread): the
  // core's memo, for the hit path in on_access. Cleared before anything makes that unsafe
  // (the first pthread_create, the end of recording, fork).
  sim::HitMemo* memo = nullptr;
  // Set once the program has several threads and the relay runs (relay.h): accesses go to
  // lane.ring, or are dropped when the thread got no ring.
  bool relayed = false;
  // From here on the relay writes (on every access it simulates for this thread): on host lines
  // apart from the fields above, which this thread reads on every access.
  alignas(64) relay::Lane lane;
  sim::AccessResult result;  // the simulator's answer when something missed (not zeroed per
                             // access: that was a 104-byte rep stos on every hit)
  // Heap objects this thread's misses landed in, used without the store's locks while `memo`
  // is set (see object_detaches()); valid while object_detaches() == objects_epoch.
  struct CachedObject {
    uintptr_t start = 0, end = 0;
    HeapObject* obj = nullptr;
  };
  static constexpr uint32_t kCachedObjects = 128;  // a power of two (see page_slot)
  CachedObject objects[kCachedObjects];
  uint64_t objects_epoch = 0;
  // Pages in which no live object was found (globals, stacks): their misses skip the store's
  // page walks. An entry holds while object_attaches() still equals its epoch.
  struct ClearPage {
    uint64_t page_plus_one = 0;
    uint64_t epoch = 0;
  };
  static constexpr uint32_t kClearPages = 512;  // a power of two
  ClearPage clear_pages[kClearPages];
  uint64_t accesses = 0;
  uint64_t misses[profile::kLevels] = {};
  // Parallel mode: this thread's sharing misses (see note_parallel_sharing).
  uint32_t sharing_run = 0;     // in window `sharing_window` (its accesses / kStrictWindow)
  uint64_t sharing_window = 0;
  bool sharing_before = false;  // the window before it had kStrictSharing of them
  uint32_t sharing_total = 0;   // while threads took turns (see kStrictTurnsNs)
  // The mutexes this thread holds (innermost last; past kHeld, not followed), and whether
  // another thread released each last (handed over): sharing misses inside such a section are
  // ordered by the lock, so they do not count as threads taking turns (note_parallel_sharing).
  static constexpr uint32_t kHeld = 8;
  struct Held {
    uintptr_t addr;
    uint64_t at;  // `accesses` + 1 when it was taken
    bool handed;
  };
  Held held[kHeld] = {};
  uint32_t nheld = 0;
  // `accesses` + 1 when it last took what another thread handed over: a lock another thread
  // released last, a join, or its own start (0: never).
  uint64_t handed_at = 0;
  // Parallel mode's pacing (see pace()): when this thread looks next, and per other thread.
  uint64_t next_pace = 0;
  // Parallel mode after the move to strict order was asked for (pace_movers): this thread's
  // accesses since it moved onto the relay that were not held hits (pushes, and accesses made
  // inline under a solo grant), and at which count it looks at the threads not moved yet.
  uint64_t fed = 0, next_mover_look = 0;
  // Per simulated core (parallel mode has at most 64), for the thread that owned it at the last
  // look (pace_owner: its index + 1; a core handed to a new thread starts over).
  static constexpr uint32_t kPaced = 64;
  uint32_t pace_owner[kPaced] = {};
  uint64_t pace_seen[kPaced] = {};        // the others' access counts at this thread's last look
  uint64_t pace_asleep[kPaced] = {};      // not looked at again before this thread's count is here
  // Per core, the thread pace() or pace_movers gave up on: not waited for again before then
  // (mono_ns), and how long that skip was (doubling while it stays behind; 0: it caught up).
  uint64_t pace_skip_until[kPaced] = {};
  uint64_t pace_skip_ns[kPaced] = {};
  std::atomic<bool> exited{false};
  bool keep_parallel = false;  // strict order was asked for, but this thread got no lane
  // Its core was an ended thread's: the core's history is forgotten at its first simulated access
  // (simulate), by whoever feeds the core.
  bool forget_core = false;
  // Threads simulating at once (locks, parallel): what they count for the working set and the
  // spatial view on their own, summed by finish() (flow::add_misses, spatial::add), instead of a
  // locked add per miss on a line every thread writes.
  uint64_t ws_misses = 0, victims_seen = 0, victims_outside = 0;
  IpTable ips;
  StepTable steps;  // how each instruction's misses step through memory
  // Re-conflict distances: this thread's L1 misses so far, and per L1 set (folded, g.rcd_sets)
  // that count at its latest miss on the set (0 = none yet). nullptr when off or out of memory.
  uint64_t rcd_misses = 0;
  uint64_t* rcd_last = nullptr;
  // The 64 bytes around this thread's last two L1 misses, as they were just before the access
  // (for StepKind kStepPointer); copied only where the access has not happened yet.
  uint64_t missed_words[2][8] = {};
  uint32_t missed_next = 0;
  // Order between threads (relay.h): the last position this thread made its lane wait for, per
  // lane id % kDepCache (a spin on a flag nobody wrote since pushes no more markers), and what a
  // joiner of this thread waits for (its position when it exited; 0 = nothing).
  static constexpr uint32_t kDepCache = 16;
  uint64_t dep_seen[kDepCache] = {};
  pthread_t self{};
  std::atomic<uint64_t> final_mark{0};
  uint64_t progress_published = 0;  // `accesses` as of this thread's last progress tick
};

struct Global {
  std::atomic<int> state{kOff};
  sim::Hierarchy* sim = nullptr;
  size_t nlevels = 0;
  unsigned line_shift = 6;
  uint64_t l1_sets = 64;
  uint32_t l1_ways = 1;
  bool count_sets = true;  // per-set counts and re-conflict distances (WHYMISS_SETS)
  uint64_t rcd_sets = 64;  // l1_sets folded to profile::kMaxSetRecords
  // l1_sets - 1 and rcd_sets - 1 when l1_sets is a power of two (0 otherwise): a miss's set and
  // folded set without two divisions (see l1_set / rcd_set).
  uint64_t l1_set_mask = 0, rcd_set_mask = 0;
  uint32_t cores = kMaxCores;
  pid_t pid = 0;
  uint64_t start_ns = 0;
  pthread_key_t key{};
  std::atomic<uint32_t> next_index{0};
  std::atomic<ThreadState*> threads[kMaxThreads] = {};
  // What a thread about to start must wait for: its creator's position (a sync mark, see
  // sync_mark()), written by next_thread_index() and read when the new thread attaches.
  std::atomic<uint64_t> parent_mark[kMaxThreads] = {};
  std::atomic<uint32_t> core_owner[kMaxCores] = {};  // thread index that last attached to a core
  SpinLock merged_lock;
  IpTable merged;  // tables of exited threads
  StepTable merged_steps;
  LineTable lines;
  std::atomic<uint64_t> dropped_accesses{0};
  bool membarrier_ok = false;
  bool one_per_core = true;
  // Threads not recorded, and why (the notes; a thread without a core is counted below): started
  // without pthread_create while the simulator ran without locks, or no memory, lane or index
  // left for them. Their accesses are dropped.
  std::atomic<uint64_t> threads_raw_clone{0}, threads_no_room{0};
  // One simulated core per thread (the default): threads that found none (past the last core,
  // and in parallel mode no core left by an exited thread). Their accesses are dropped.
  std::atomic<uint64_t> threads_past_cores{0};
  // Parallel mode: the cores no thread owns (bit c: core c; all 64 at start), taken by a thread
  // when it attaches and given back when it exits (claim_core, release_core): by the thread
  // itself while it still simulates its own accesses (thread_exit), by the relay once it has
  // simulated all a relayed thread pushed (relay_retire).
  std::atomic<uint64_t> free_cores{0};
  // The simulator runs without locks while the process has one thread. The first
  // pthread_create turns them on (next_thread_index) before the new thread exists; see
  // Hierarchy::set_concurrent. Written only while single-threaded, so never torn.
  std::atomic<bool> concurrent{false};
  std::atomic<bool> attached_unhooked{false};  // a thread not started by our pthread_create
  // The relay runs: only its thread touches the simulator, which then needs no locks.
  bool relay_mode = false;
  relay::Knobs relay_knobs;  // from the environment, read by init()
  // WHYMISS_INTERLEAVE=locks (experimental, for #21's measurements; docs/parallel-sim.md): no
  // relay; every thread simulates its own accesses inline under the simulator's shard locks (the
  // fallback when the relay cannot start), so threads interleave in host order, not access by
  // access.
  bool no_relay = false;
  // Parallel mode (the default; WHYMISS_INTERLEAVE=parallel; docs/parallel-sim.md): threads simulate
  // inline too (the relay idles until they contend: `strict` below), but with the simulator's
  // parallel protocol (sim::Knobs::parallel: cross-core effects are messages, a core's private
  // levels take no lock), one thread per simulated core, at most 64 at once, and each thread taking its
  // own memo hits (hit_path.h, parallel_hit). Threads interleave in host order, as with locks.
  bool parallel = false;
  bool parallel_hits = false;  // parallel, and the simulator is lock-free (one thread per core)
  // Parallel mode's move to strict order once threads contend for lines (docs/parallel-sim.md,
  // "Strict from the first contention"): the relay starts and every thread moves onto a lane of
  // its own at its next access that is not a memo hit, for the rest of the run. kStrict* below.
  std::atomic<int> strict{0};
  // Parallel mode: the relay thread was started, idle, at the first pthread_create (as in strict
  // mode, and never from an access: relay::start looks up and calls pthread_create, which an
  // access made inside dlopen or a signal handler must not), for threads to move to.
  bool relay_parked = false;
  std::atomic<uint64_t> strict_at{0};  // accesses all threads had made when it was asked for
  std::atomic<uint32_t> strict_thread{0};  // the thread that asked for it
  std::atomic<int> strict_why{0};  // a StrictWhy: which rule asked (for the note)
  std::atomic<uint32_t> moved{0};  // threads moved (or started) onto the relay after that
  std::atomic<uint32_t> kept_parallel{0};  // threads that found no lane then, and stayed parallel
  std::atomic<uint64_t> cores_used{0};  // parallel mode: cores some thread claimed (bit c: core c)
  // WHYMISS_STRICT_AFTER=N (for tests: docs/parallel-sim.md): a thread asks for strict order once
  // it has made N accesses, sharing misses or not. 0 = only on sharing misses.
  uint64_t strict_after = 0;
  std::atomic<uint32_t> live{0};  // recorded threads that have not exited
  std::atomic<uint64_t> waited_ns{0};  // parallel: when a thread last waited for another (pace)
  bool turns_always = false;           // WHYMISS_TURNS=1 (tests: see kStrictSharingInTurns)
  std::atomic<bool> written{false};  // the profile is on disk (see finish)
  uint32_t policy = 0, inclusive = 1;
  char output[4096] = {};
  char command[4096] = {};
  char geometry_source[512] = {};  // (with the reason when detection fell back to defaults)
  // Why a thread got no simulated core (Hierarchy::add_core's sentence; the first refusal),
  // for the profile's notes. Written once, under core_refused's exchange.
  std::atomic<bool> core_refused{false};
  std::atomic<uint64_t> threads_without_core{0};
  char core_refusal[512] = {};
};
constinit Global g;

// Global::strict: not asked for (yet); asked for, threads move onto the relay; or no relay to move
// to (it could not start: threads stay parallel, in host order, and do not pace).
enum : int { kStrictNone, kStrictRunning, kStrictOff };
// Which rule asked for strict order (the profile's note says, so that a run shows which one fires).
enum class StrictWhy { After, Rate, Turns };
inline const char* strict_why_text(StrictWhy w) {
  switch (w) {
    case StrictWhy::Rate: return "sharing misses (one in 256 of its accesses, two windows running)";
    case StrictWhy::Turns: return "sharing misses while threads took turns on the CPUs";
    case StrictWhy::After: break;
  }
  return "access count reached WHYMISS_STRICT_AFTER";
}
// A parallel thread asks for strict order when two windows of kStrictWindow of its own accesses in
// a row each hold kStrictSharing of its sharing misses (one in 256 accesses, sustained). In strict
// order the contended workloads miss on every second to fourth access, and in host order still
// about one in 13 (a thread holding the line hits while its rival's simulated miss takes a
// microsecond). Private work (bench/private_threads.c) and one-way hand-overs never miss that way
// (a sharing miss needs a copy this core had and another core took; round trips do, once per
// line and trip: a worker writing a result its main thread reads, in a line main wrote before),
// and `zstd -3 -T2`, whose
// threads pass buffers and a job queue, misses one in 30,000 overall but 16 in 64 Ki accesses at
// its start: one in 4096, or one window, moved it to strict order for the whole run at 1.1x the
// time, for sharing counts host order already gets within 5 % (docs/parallel-sim.md).
constexpr uint32_t kStrictSharing = 256;
constexpr uint64_t kStrictWindow = uint64_t(1) << 16;
// Threads that take turns on the host's CPUs (more of them runnable than CPUs, or other processes
// on the CPUs) run a time slice at a time, and a line they would contend for on a machine with a
// core each misses once per turn, not once per few accesses: four threads writing counters two
// to a line (the corpus's perthread_malloc_main_t4) gave 15-16 sharing misses in a run on two
// vCPUs where strict order counts 3 million. So while threads take turns (some thread had to wait
// for a preempted one within the last kStrictTurnsNs: pace()), a thread asks for strict order at
// its kStrictSharingInTurns-th sharing miss, whatever their rate. (The misses fall mostly on the
// threads waited for, as they resume, not on the ones that waited.) Private work never misses
// that way (bench/private_threads.c with 4 and 8 threads on 2 CPUs stays parallel).
// Not every sharing miss counts there: one inside a critical section of a mutex another thread
// released last (the lock was handed over; up to kHandedSection accesses after taking it), or in
// the kHandedWindow accesses after taking such a lock, after a pthread_join, or at the start of a
// thread pthread_create started, reads what the releaser published: the hand-over orders it, in
// host order as in strict order, so taking turns does not hide it. zstd -3 -T1's thread pools
// hand jobs over under mutexes: their queues' and lock words' lines, and the job's fields read
// just after the dequeue, missed that way (all within 4,300 accesses of the hand-over) and moved
// it to strict order after 0.4 M of its 115 M accesses, at the relay's speed; a main thread that
// reads what the workers it joined wrote into lines it wrote before misses that way once per line
// and round. The price: racy sharing in those spans does not count either (bench/README.md,
// "Parallel against strict": pools that race still moved). WHYMISS_TURNS=1 (for tests) acts as
// if some thread had just waited, all run long.
constexpr uint32_t kStrictSharingInTurns = 4;
constexpr uint64_t kStrictTurnsNs = 10 * 1000 * 1000;
constexpr uint64_t kHandedWindow = 8192;
constexpr uint64_t kHandedSection = uint64_t(1) << 20;  // a critical section, at most this long

thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;

// ---- progress (model/progress.h) ----
constinit progress::Page* g_progress = nullptr;

// Maps the page WHYMISS_PROGRESS names, if any (at init; errno kept). Anything unexpected (no
// file, too small, not our magic) leaves progress off: the recording goes on regardless.
void attach_progress() {
  const char* path = std::getenv("WHYMISS_PROGRESS");
  if (path == nullptr || *path == '\0') return;
  const int saved = errno;
  const int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  struct stat st {};
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) >= progress::kSize) {
    void* m = mmap(nullptr, progress::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      auto* page = static_cast<progress::Page*>(m);
      if (page->magic == progress::kMagic) {
        page->attached.fetch_add(1, std::memory_order_relaxed);
        g_progress = page;
      } else {
        munmap(m, progress::kSize);
      }
    }
  }
  if (fd >= 0) close(fd);
  errno = saved;
}

// Called by the CPU-time sampler's signal handler on the interrupted thread (async-signal-safe:
// two loads, one store to the thread's own state, one atomic add). The thread's count is written
// by itself and, for a relayed thread, by the relay: an aligned 8-byte load that may be a tick
// behind, which is all a progress line needs.
void progress_tick() {
  progress::Page* page = g_progress;
  ThreadState* t = t_state;
  if (page == nullptr || t == nullptr) return;
  const uint64_t now = __atomic_load_n(&t->accesses, __ATOMIC_RELAXED);
  const uint64_t delta = now - t->progress_published;
  t->progress_published = now;
  if (delta) page->accesses.fetch_add(delta, std::memory_order_relaxed);
}
thread_local bool t_in_runtime __attribute__((tls_model("initial-exec"))) = false;
thread_local bool t_unrecorded __attribute__((tls_model("initial-exec"))) = false;  // refused for good
thread_local uint32_t t_preassigned __attribute__((tls_model("initial-exec"))) = 0;  // index + 1
thread_local bool t_finishing __attribute__((tls_model("initial-exec"))) = false;  // in finish()

uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
uint64_t now_ns() { return clock_ns(CLOCK_REALTIME); }
uint64_t mono_ns() { return clock_ns(CLOCK_MONOTONIC); }  // (pacing's waits)

struct Inside : InsideScope {
  Inside() : InsideScope(t_in_runtime) {}
};


// Whether the process already has more than one thread: /proc/self/status's "Threads:" field.
// Unknown (unreadable) counts as yes, which keeps the locks on.
bool has_other_threads() {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* p = std::strstr(buf, "\nThreads:");
  if (!p) return true;
  p += 9;  // past "\nThreads:"
  while (*p == ' ' || *p == '\t') ++p;
  return !(p[0] == '1' && (p[1] == '\n' || p[1] == '\0'));
}

void thread_exit(void* p);
void after_fork_child();
void finish(int term_signal);
bool start_relay();
void park_relay();

// Environment variable `name` as decimal digits, above `cap` as `cap`, into *out; anything else (a
// sign, blanks, letters, nothing) leaves *out as it is.
template <typename T>
void env_digits(const char* name, uint32_t cap, T* out) {
  const char* c = std::getenv(name);
  if (c == nullptr || *c == '\0') return;
  uint32_t v = 0;
  for (; *c >= '0' && *c <= '9'; ++c) v = v < cap ? std::min<uint32_t>(v * 10 + uint32_t(*c - '0'), cap) : cap;
  if (*c == '\0') *out = T(v);
}

void init() {
  int expected = kOff;
  if (!g.state.compare_exchange_strong(expected, kInitialising)) return;
  Inside in;
  if (!profile_output_from_env(g.output, sizeof g.output)) {
    g.state.store(kDisabled);
    return;
  }
  CacheGeometry geo;
  if (const char* spec = std::getenv("WHYMISS_CACHE"); spec && *spec) {
    auto r = parse_cache_spec(spec);
    if (!r) {
      const std::string why = "WHYMISS_CACHE '" + std::string(spec) + "' is invalid: " + r.error();
      note_runtime_disabled(why.c_str());
      g.state.store(kDisabled);
      return;
    }
    geo = r.value();
  } else {
    geo = detect_geometry();
  }
  sim::Knobs k;
  // Parallel unless strict (or locks) is asked for, or threads are folded onto --cores N cores:
  // folding is a model the relay's order reproduces, while parallel mode would fold them under
  // locks in host order and never move to strict order. (whymiss record refuses other values.)
  const char* cores_env = std::getenv("WHYMISS_CORES");
  const bool folding = cores_env && std::atoi(cores_env) > 0;
  const char* il = std::getenv("WHYMISS_INTERLEAVE");
  const bool strict = il && std::strcmp(il, "strict") == 0, locks = il && std::strcmp(il, "locks") == 0;
  // (An unknown value, set without whymiss record: the default.)
  g.parallel = (il && std::strcmp(il, "parallel") == 0) || (!strict && !locks && !folding);
  g.no_relay = g.parallel || locks;
  if (const char* c = cores_env; folding) {
    k.cores = uint32_t(std::atoi(c)) > kMaxCores ? kMaxCores : uint32_t(std::atoi(c));
    g.one_per_core = k.cores == kMaxCores;
  } else {
    // Simulated cores are created on first use: one per thread. (Parallel: 64, the most the
    // simulator's lock-free protocol takes.)
    k.cores = g.parallel ? 64 : kMaxCores;
    g.one_per_core = true;
  }
  // One thread per core (the default mapping): no per-core lock is needed. Threads past the
  // last core are then not recorded (see attach_thread) rather than folded.
  k.parallel = g.parallel;
  if (const char* a = std::getenv("WHYMISS_TURNS"); a && g.parallel)
    g.turns_always = std::strcmp(a, "1") == 0;
  if (const char* a = std::getenv("WHYMISS_STRICT_AFTER"); a && g.parallel)
    g.strict_after = std::strtoull(a, nullptr, 10);
  g.parallel_hits = g.parallel && g.one_per_core && k.cores <= 64;
  if (g.parallel_hits) g.free_cores.store(k.cores == 64 ? ~uint64_t(0) : (uint64_t(1) << k.cores) - 1);
  if (g.parallel_hits) g_held_hits.store(true, std::memory_order_relaxed);
  k.one_thread_per_core = g.one_per_core;
  if (const char* p = std::getenv("WHYMISS_POLICY"); p && *p) {
    auto pol = sim::parse_policy(p);
    if (pol) k.policy = pol.value();
  }
  if (const char* l = std::getenv("WHYMISS_LLC"); l && std::strcmp(l, "non-inclusive") == 0)
    k.inclusive_llc = false;
  // Threads created before we started (from other constructors): the relay from the start, or
  // failing that, locks.
  const bool threaded = has_other_threads();
  k.concurrent = threaded;
  g.concurrent.store(threaded, std::memory_order_relaxed);
  // The simulator takes at most the memory there is now: a geometry too big for it (or a core
  // per thread past it, see attach_thread) is refused with a sentence, never left to bad_alloc
  // or the OOM killer, which would take the program down with it.
  k.memory_budget = simulator_memory_budget();
  // Per-set counts and re-conflict distances (the `sets` view); WHYMISS_SETS=0 turns them off.
  if (const char* sc = std::getenv("WHYMISS_SETS"); sc && std::strcmp(sc, "0") == 0)
    k.count_sets = false;
  g.count_sets = k.count_sets;
  auto h = sim::Hierarchy::create(geo, k);
  if (!h) {
    note_runtime_disabled(h.error().c_str());
    g.state.store(kDisabled);
    return;
  }
  g.sim = h.value().release();
  // The relay's knobs (relay::Knobs): WHYMISS_RELAY_NICE, added to the relay thread's nice, above
  // 19 as 19 (nice's own limit); WHYMISS_MAX_LANES (tests), the lanes a run may open.
  env_digits("WHYMISS_RELAY_NICE", 19, &g.relay_knobs.nice);
  env_digits("WHYMISS_MAX_LANES", 1u << 20, &g.relay_knobs.max_lanes);
  g.relay_mode = threaded && start_relay();
  if (g.relay_mode) g.sim->set_concurrent(false);  // the relay is the simulator's only caller
  if (threaded && g.parallel_hits) park_relay();
  g.nlevels = geo.levels.size();
  while ((1u << g.line_shift) < geo.line()) ++g.line_shift;
  g.l1_sets = geo.levels[0].sets();
  g.l1_ways = geo.levels[0].ways;
  g.rcd_sets = g.l1_sets < profile::kMaxSetRecords ? g.l1_sets : profile::kMaxSetRecords;
  static_assert((profile::kMaxSetRecords & (profile::kMaxSetRecords - 1)) == 0);
  if ((g.l1_sets & (g.l1_sets - 1)) == 0) g.l1_set_mask = g.l1_sets - 1, g.rcd_set_mask = g.rcd_sets - 1;
  g.cores = k.cores;
  g.policy = uint32_t(k.policy);
  g.inclusive = k.inclusive_llc;
  std::strncpy(g.geometry_source, geo.source.c_str(), sizeof g.geometry_source - 1);
  g.pid = getpid();
  g.start_ns = now_ns();
  read_command_line(g.command, sizeof g.command);
  pthread_key_create(&g.key, thread_exit);
  pthread_atfork(heap_before_fork, heap_after_fork_parent, after_fork_child);
  g.membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  // Fatal and terminating signals write the profile first (common/signal_guard.h).
  sig::install_fatal_guards(finish, g.pid);
  attach_progress();
  cpu::Knobs cpu_knobs;
  cpu_knobs.tick = progress_tick;
  cpu::start(g.pid, cpu_knobs);  // where the CPU time goes: instrumented code or not (cpu_sampler.h)
  // Reuse distances for miss-ratio curves (reuse.h): every line followed by default (exact
  // distances; "all" says the same); WHYMISS_MRC=sampled follows one line in 16 (SHARDS),
  // WHYMISS_MRC=0 turns them off. WHYMISS_MRC_HALF: the half-line curve's stack, the same words
  // (its default: reuse::kHalfDefault; WHYMISS_MRC=sampled samples it too unless it says "all").
  if (const char* m = std::getenv("WHYMISS_MRC"); !(m && std::strcmp(m, "0") == 0)) {
    reuse::Knobs rk;
    if (m && std::strcmp(m, "sampled") == 0) rk.rate_shift = rk.half_rate_shift = 4;
    reuse::half_knob(std::getenv("WHYMISS_MRC_HALF"), &rk);
    // The stacks on a thread of their own unless WHYMISS_MRC_THREAD=0 (same curves; reuse.h).
    const char* th = std::getenv("WHYMISS_MRC_THREAD");
    rk.thread = !(th && std::strcmp(th, "0") == 0);
    reuse::start(g.line_shift, rk);
  }
  // The access log for what-if replays (access_log.h): WHYMISS_ACCESS_LOG entries, 0 = off.
  {
    uint64_t entries = uint64_t(1) << 22;
    if (const char* e = std::getenv("WHYMISS_ACCESS_LOG"); e && *e) entries = std::strtoull(e, nullptr, 10);
    alog::start(entries);
  }
  // Data flow between threads and working sets over time (dataflow.h; WHYMISS_FLOW=0,
  // WHYMISS_WORKING_SET=0 turn them off).
  flow::start(g.sim, g.line_shift);
  // Spatial use of heap objects' lines (spatial.h; WHYMISS_SPATIAL=0 turns it off).
  spatial::start(g.line_shift);
  // The initialising thread (the main thread, before main) is sampled from now on, under the
  // index it gets at its first access when no other thread came first (the usual case).
  cpu::thread_start(g.next_index.load(std::memory_order_relaxed));
  g.state.store(kRecording, std::memory_order_release);
}

__attribute__((constructor(101))) void runtime_ctor() { init(); }

// ---- order between threads (relay.h, "Order between threads") ----
// A sync mark packs a lane id and a position in that lane's ring: (id + 1) << kPosBits | pos;
// 0 = none. Releases store the releasing thread's mark in g_sync, hashed by address; acquires
// read it back and make their own lane wait for that position.
constexpr unsigned kPosBits = 40;
constexpr uint64_t kPosMask = (uint64_t(1) << kPosBits) - 1;
constexpr unsigned kSyncSlotBits = 12;
constinit std::atomic<uint64_t> g_sync[1u << kSyncSlotBits] = {};

std::atomic<uint64_t>& sync_slot(uintptr_t addr) {
  return g_sync[((addr >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - kSyncSlotBits)];
}
// The thread's mark, or 0 when it has no lane (single-threaded so far, or past its exit) or
// recording is over (finished, or a forked child: no relay reads the ring any more).
uint64_t sync_mark(ThreadState* t) {
  if (t == nullptr || !t->relayed || t->lane.ring == nullptr ||
      t->lane.closing.load(std::memory_order_relaxed) ||
      g.state.load(std::memory_order_relaxed) != kRecording)
    return 0;
  return (uint64_t(t->lane.id) + 1) << kPosBits | (t->lane.ring->produced() & kPosMask);
}
// Makes the calling thread's lane wait for `mark` (unless it is its own, or already waited for).
void depend_on(ThreadState* t, uint64_t mark) {
  if (mark == 0 || sync_mark(t) == 0) return;
  const uint32_t id = uint32_t(mark >> kPosBits) - 1;
  if (id == t->lane.id) return;
  uint64_t& seen = t->dep_seen[id % ThreadState::kDepCache];
  if ((seen >> kPosBits) == (mark >> kPosBits) && (seen & kPosMask) >= (mark & kPosMask)) return;
  seen = mark;
  relay::depend(&t->lane, id, mark & kPosMask);
  // A thread lent the simulator (solo) would simulate its next access inline at once: without
  // its memo it goes through access() again, which fences (waits for the relay to pass the
  // marker) before simulating inline. Only this thread writes the field.
  if (t->memo != nullptr) t->memo = nullptr;
}

// A thread with a lane takes held hits on its own core's memo (hit_path.h), unless threads
// share cores: another thread's access would then move the memo under it.
void enable_held_hits(ThreadState* t) {
  if (g.one_per_core) {
    t_hit = HitPath{g.sim->hit_memo(t->core), &t->ips, &t->accesses, &t->lane, &t->busy};
    t_hit.thread = t->index;
  }
}

// Parallel mode (Global::parallel_hits): the thread takes its own memo hits (hit_path.h).
void enable_parallel_hits(ThreadState* t) {
  t_hit = HitPath{g.sim->hit_memo(t->core), &t->ips, &t->accesses, nullptr, &t->busy};
  t_hit.thread = t->index;
  t_hit.pace_at = &t->next_pace;
}

// Makes sure simulated core `core` exists before a thread uses it (Hierarchy::add_core): false
// when the simulator cannot have it (memory), and the first such sentence is kept for the notes.
// The thread then runs unrecorded, like one past the last core; the program never notices.
bool core_for(uint32_t core) {
  Status st = g.sim->add_core(core);
  if (st) return true;
  g.threads_without_core.fetch_add(1, std::memory_order_relaxed);
  if (!g.core_refused.exchange(true))
    std::strncpy(g.core_refusal, st.error().c_str(), sizeof g.core_refusal - 1);
  return false;
}

// Parallel mode: the core a thread attaching now simulates on (Global::free_cores): core
// index % 64 if no thread owns it (so that cores follow thread numbers while no thread ended),
// else the lowest one free. A core an exited thread gave back keeps what that thread left in its
// caches, as a core a finished thread ran on; the thread released it after its last access
// (thread_exit), and any message another core posted meanwhile waits in the core's inbox for the
// new owner's first access. False when all 64 are owned.
bool claim_core(uint32_t index, uint32_t* core, bool* reused) {
  const uint64_t mine = uint64_t(1) << (index % 64);
  uint64_t m = g.free_cores.load(std::memory_order_acquire);
  while (m != 0) {
    const uint64_t bit = (m & mine) ? mine : m & (~m + 1);
    if (g.free_cores.compare_exchange_weak(m, m & ~bit, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      *core = uint32_t(__builtin_ctzll(bit));
      *reused = (g.cores_used.fetch_or(bit, std::memory_order_relaxed) & bit) != 0;
      return true;
    }
  }
  return false;
}

// The other half of claim_core: `core` is free for a later thread. Called after the last access
// simulated on it (release: the next owner's claim sees that access's effects).
void release_core(uint32_t core) {
  g.free_cores.fetch_or(uint64_t(1) << core, std::memory_order_release);
}

// An exiting thread's instruction and step tables, folded into the merged ones.
void merge_tables(ThreadState* t) {
  LockGuard lock(g.merged_lock);
  g.merged.merge_from(t->ips);
  g.merged_steps.merge_from(t->steps);
  t->ips.release();
  t->steps.release();
}

ThreadState* attach_thread() {
  if (t_unrecorded || g.state.load(std::memory_order_acquire) != kRecording) return nullptr;
  Inside in;
  // A second thread that did not come through our pthread_create (a raw clone) while the
  // simulator runs without locks cannot be recorded safely: the first one may be mid-access.
  const bool unsafe = !t_preassigned && !g.concurrent.load(std::memory_order_acquire) &&
                      g.attached_unhooked.exchange(true);
  uint32_t index = t_preassigned ? t_preassigned - 1 : g.next_index.fetch_add(1);
  uint32_t core = index % g.cores;
  // One core per thread: past the last core (the relay's order), or none left (parallel mode).
  bool claimed = false, no_core = false, reused = false;
  if (!unsafe && index < kMaxThreads) {
    if (g.parallel_hits) no_core = !(claimed = claim_core(index, &core, &reused));
    else no_core = g.one_per_core && index >= g.cores;
    if (no_core) g.threads_past_cores.fetch_add(1, std::memory_order_relaxed);
  }
  void* mem = nullptr;
  bool told = no_core;  // (a thread without a core is told by threads_past_cores)
  bool ok = !unsafe && index < kMaxThreads && !no_core;
  if (ok && !core_for(core)) ok = false, told = true;  // (and that one by threads_without_core)
  if (ok && !(mem = private_alloc(sizeof(ThreadState) + alignof(ThreadState)))) ok = false;
  if (!ok) {
    if (claimed) release_core(core);
    if (unsafe) g.threads_raw_clone.fetch_add(1, std::memory_order_relaxed);
    else if (!told) g.threads_no_room.fetch_add(1, std::memory_order_relaxed);
    t_unrecorded = true;
    return nullptr;
  }
  // Aligned as declared (private_alloc gives 16 bytes): the lane keeps the relay's bookkeeping
  // off the host line its owner reads on every access. Never freed.
  const uintptr_t a = alignof(ThreadState);
  auto* t = new (reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem) + a - 1) & ~(a - 1)))
      ThreadState;
  t->index = index;
  if (g.count_sets)
    if (void* m = private_alloc(g.rcd_sets * sizeof(uint64_t))) {
      std::memset(m, 0, g.rcd_sets * sizeof(uint64_t));
      t->rcd_last = static_cast<uint64_t*>(m);
    }
  t->tid = uint32_t(syscall(SYS_gettid));
  t->core = core;
  t->errno_loc = &errno;
  t->forget_core = reused;  // (see simulate)
  // (Parallel mode once strict order runs: onto a lane from the start.)
  const bool to_relay = g.relay_mode || g.strict.load(std::memory_order_acquire) == kStrictRunning;
  t->relayed = to_relay;  // (before the relay can see the lane)
  if (to_relay && !relay::open_lane(&t->lane, t, int(t->tid))) t->relayed = false;
  if (t->relayed) {
    enable_held_hits(t);
    if (!g.relay_mode) g.moved.fetch_add(1, std::memory_order_relaxed);
    t->self = pthread_self();
    // Its creator's accesses before pthread_create come first (they may still be queued).
    depend_on(t, g.parent_mark[index].load(std::memory_order_relaxed));
  } else if (to_relay && !g.parallel_hits) {
    if (claimed) release_core(core);
    g.threads_no_room.fetch_add(1, std::memory_order_relaxed);
    t_unrecorded = true;
    return nullptr;  // (its ThreadState is not reused: rare, and small)
  } else if (to_relay) {
    // Parallel mode with no lane left: the thread simulates its own accesses on its core, as a
    // thread that found no lane when it moved (strict_asked).
    t->keep_parallel = true;
    g.kept_parallel.fetch_add(1, std::memory_order_relaxed);
    enable_parallel_hits(t);
  } else if (!g.concurrent.load(std::memory_order_acquire)) {
    t->memo = g.sim->hit_memo(t->core);
    t_hit = HitPath{t->memo, &t->ips, &t->accesses};  // (t becomes t_state below)
    t_hit.thread = index;
  } else if (g.parallel_hits) {
    enable_parallel_hits(t);
  }
  if (t_preassigned) t->handed_at = 1;  // (started by pthread_create: see kHandedWindow)
  g.core_owner[t->core].store(index, std::memory_order_relaxed);
  g.live.fetch_add(1, std::memory_order_relaxed);
  g.threads[index].store(t, std::memory_order_release);
  pthread_setspecific(g.key, t);
  t_state = t;
  cpu::thread_start(index);
  return t;
}

// pthread key destructor: the thread is exiting; fold its instruction table into the merged one.
void thread_exit(void* p) {
  auto* t = static_cast<ThreadState*>(p);
  if (!t || g.state.load() != kRecording) return;
  g.live.fetch_sub(1, std::memory_order_relaxed);
  t->exited.store(true, std::memory_order_relaxed);
  // (Before `relayed` is read: a signal handler's access after this sees `exited` and does not
  // move the thread onto a lane, strict_asked.)
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (t->relayed) {  // the relay merges its table once it has simulated all it pushed
    t->final_mark.store(sync_mark(t), std::memory_order_release);  // for pthread_join
    t_hit = HitPath{};  // the relay frees the ring and the table after close_lane
    if (t->lane.ring) relay::close_lane(&t->lane);
    return;
  }
  Inside in;
  t_hit = HitPath{};     // (parallel: its memo hits count into the tables released below)
  reuse::thread_done();  // (its tracker batch, when it simulated inline under locks)
  merge_tables(t);
  // Parallel mode: the core goes back to the pool for a later thread (claim_core). This thread's
  // accesses from here on (instrumented code in a later key destructor) are dropped and counted,
  // as a relayed thread's after its lane closed: the core may have a new owner by then. Not a core
  // the thread left in the middle of an access (`busy` up: cancelled, or a signal handler that
  // interrupted one called pthread_exit): its state may be half updated.
  if (g.parallel_hits) {
    t_state = nullptr;
    t_unrecorded = true;
    if (!t->busy.load(std::memory_order_relaxed)) release_core(t->core);
  }
}

struct ObjectHit {
  int kind;
  uint32_t thread;
  uint64_t set_bit;
  uint64_t serial;
  HeapObject* obj;  // set by count_object_miss
  uint32_t core;    // the simulated core and line of the miss (for a conflict's rivals)
  uint64_t line;
  bool write;
  // Only the data flow hears of it (a compulsory miss or a write upgrade): the object's miss
  // statistics count non-compulsory misses, as they always did.
  bool flow_only;
  bool miss;  // an L1 miss (false: a write that upgraded a shared copy)
};

void count_object_miss(HeapObject& o, void* arg) {
  auto* h = static_cast<ObjectHit*>(arg);
  flow::touch(o, h->thread, h->write, h->miss,
              !g.concurrent.load(std::memory_order_relaxed) || g.relay_mode);
  h->serial = o.serial;
  h->obj = &o;
  if (h->flow_only) return;
  o.misses[h->kind]++;
  o.thread_mask |= uint64_t(1) << (h->thread % 64);
  o.l1_set_mask |= h->set_bit;
  if (h->kind == int(Outcome::Conflict)) {
    // Did the object's own lines evict this one (a stride within it) or other data? The
    // analysis tells the application's conflicts from the allocator's by this count.
    const uint32_t ways = g.l1_ways;
    const uint64_t lo = o.start >> g.line_shift, hi = ((o.start + o.size - 1) >> g.line_shift) + 1;
    if (o.size != 0 && g.sim->rivals_within(h->core, h->line, lo, hi, ways) >= ways) o.self_conflicts++;
  }
}

// Which of n (a power of two) per-thread slots a 4 KiB page uses.
inline size_t page_slot(uint64_t page, uint32_t n) {
  return size_t((page * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctz(n)));
}

// Parallel mode: whether `o` is, as far as its record says, this thread's alone: only it missed
// in it and it touched it last (relaxed loads of fields other threads write under the store's
// lock). Then its misses go through the thread's object cache without the lock, as while one
// thread runs. An object that another thread starts to use is caught at that thread's first miss
// in it (which takes the lock and leaves its own mark); an update of ours racing with that one
// is the only one that can be lost or land before it.
inline bool mine_alone(const HeapObject& o, const ThreadState* t) {
  const uint64_t me = uint64_t(1) << (t->index % 64);
  if (__atomic_load_n(&o.thread_mask, __ATOMIC_RELAXED) != me) return false;
  const uint32_t last = __atomic_load_n(&o.flow_last, __ATOMIC_RELAXED);
  return last == 0 || (last & ~kFlowWriteBit) == t->index + 1;
}

// with_object(addr, count_object_miss, hit), through the thread's object cache while the process
// has one thread: a line of a big array or of a few hot objects then costs no lock and no search.
// Parallel mode (threads simulating at once): for objects only this thread uses (mine_alone).
// The cached record stays valid there too: the access is simulated before it happens, so a free
// of the object by another thread that the program orders after it (as a correct program must)
// comes after this update, and a free before it changed object_detaches() where we can see it.
bool count_miss_in_live_object(ThreadState* t, uintptr_t addr, ObjectHit* hit) {
  // (Not in solo mode: other threads still run, and may free objects, uninstrumented code.)
  const bool alone = t->memo != nullptr;
  if ((!alone && !g.parallel_hits) || t->relayed) return with_object(addr, count_object_miss, hit);
  const uint64_t epoch = object_detaches();
  if (epoch != t->objects_epoch) {
    for (auto& c : t->objects) c = ThreadState::CachedObject{};
    t->objects_epoch = epoch;
  }
  auto& c = t->objects[page_slot(addr >> 12, ThreadState::kCachedObjects)];
  if (c.obj != nullptr && addr - c.start < c.end - c.start && (alone || mine_alone(*c.obj, t))) {
    count_object_miss(*c.obj, hit);
    return true;
  }
  if (!with_object(addr, count_object_miss, hit)) return false;
  c = ThreadState::CachedObject{hit->obj->start, hit->obj->start + hit->obj->size, hit->obj};
  return true;
}

// with_object(addr, count_object_miss, hit), skipping pages known to hold no object. Safe with
// other threads too: an object that becomes live changes the epoch before anyone can access it,
// and so before the access reaches the simulator.
// Out of line: inlined into record_misses it made `capacity` 15% slower (its samples sat on
// one store in record_misses' larger frame; bench/README.md, "Simulator throughput").
__attribute__((noinline)) bool count_miss_in_object(ThreadState* t, uintptr_t addr, ObjectHit* hit) {
  const uint64_t attaches = object_attaches();
  const uint64_t page = addr >> 12;
  auto& clear = t->clear_pages[page_slot(page, ThreadState::kClearPages)];
  if (clear.page_plus_one == page + 1 && clear.epoch == attaches) return false;
  // No object was ever made findable (a program that has not allocated yet): every page is
  // clear for as long as that holds, without asking the store (which cannot vouch for a page
  // then, so its answer was never remembered and each miss asked again).
  if (attaches == 0) {
    clear = ThreadState::ClearPage{page + 1, attaches};
    return false;
  }
  if (!count_miss_in_live_object(t, addr, hit)) {
    if (page_without_objects(addr)) clear = ThreadState::ClearPage{page + 1, attaches};
    return false;
  }
  return true;
}

void note_object(InstructionRecord* s, uint64_t serial) {
  // (Once the list overflowed it never changes again: nothing to look for.)
  if (!s || !serial || s->object_count > uint32_t(profile::kRefs)) return;
  if (!add_ref(s->objects, serial)) s->object_count = profile::kRefs + 1;
  else if (s->object_count < uint32_t(profile::kRefs)) {
    uint32_t n = 0;
    while (n < uint32_t(profile::kRefs) && s->objects[n]) ++n;
    if (n > s->object_count) s->object_count = n;
  }
}

void record_sharing(ThreadState* t, uint64_t ip, const sim::LineResult& lr, Outcome o, bool write) {
  g.lines.update(lr.line, [&](LineRecord& r, bool fresh) {
    r.misses[int(o)]++;
    note_line_thread(r, t->index, lr.access_mask, write);
    uint32_t writer = g.core_owner[lr.writer_core % kMaxCores].load(std::memory_order_relaxed);
    note_line_thread(r, writer, lr.writer_mask, true);
    add_ref(r.ips, ip);
    if (fresh) {
      HeapObject objs[profile::kRefs];
      uint64_t base = lr.line << g.line_shift;
      int n = objects_overlapping(base, base + (uint64_t(1) << g.line_shift), objs, profile::kRefs);
      for (int i = 0; i < n && i < profile::kRefs; ++i) r.objects[i] = objs[i].serial;
      r.object_count = uint32_t(n);
    }
  });
}

// True on the relay's thread: the accesses it simulates happened long ago (their memory may
// have changed or gone), so it never reads the program's memory. Initial-exec like the other
// thread-locals here: the default model in a shared library calls __tls_get_addr on every
// read (twice per L1 miss).
constinit thread_local bool t_relay_thread __attribute__((tls_model("initial-exec"))) = false;

// Whether `addr` lies within 4 KiB past a value stored in the 64 bytes around one of the
// thread's last two misses (a pointer the program loaded there).
bool points_into(const ThreadState* t, uint64_t addr) {
  // All 16 words, without an exit per word (a mispredicted branch each): addr - w < 4096 as
  // unsigned numbers also says addr >= w.
  bool in = false;
  for (const auto& words : t->missed_words)
    for (uint64_t w : words) in |= (w != 0) & (addr - w < 4096);
  return in;
}

// Counts the step of this miss of `ip` from the thread's previous miss there (StepRecord).
// Returns the instruction's entry (nullptr when memory ran out), for note_rcd.
StepTable::Entry* note_step(ThreadState* t, uint64_t ip, uint64_t line, uint64_t addr) {
  const bool live = !t_relay_thread;  // the access has not happened yet: its line is readable
  StepTable::Entry* e = t->steps.get(ip);
  if (e) {
    if (e->last_line != 0) {
      const int64_t d = int64_t(line - e->last_line);
      int kind;
      if (d >= -2 && d <= 2) {
        kind = profile::kStepNext;
      } else if (d - e->last_delta >= -1 && d - e->last_delta <= 1) {  // (a stride of 2000
        // bytes steps 31 or 32 lines)
        kind = profile::kStepStride;
        e->rec.stride = d * (int64_t(1) << g.line_shift);
      } else if (live) {
        e->rec.pointer_checked++;
        kind = points_into(t, addr) ? profile::kStepPointer : profile::kStepIrregular;
      } else {
        kind = profile::kStepIrregular;
      }
      e->rec.steps[kind]++;
      e->last_delta = d;
    }
    e->last_line = line;
  }
  return e;
}

// Counts this L1 miss's re-conflict distance (profile::RcdRecord): the thread's L1 misses
// between its previous miss on the same set and this one, any kind.
// `e` is ip's entry when the caller has it (nullptr: looked up here).
void note_rcd(ThreadState* t, uint64_t ip, uint64_t line, StepTable::Entry* e) {
  const uint64_t ord = ++t->rcd_misses;
  uint64_t& last = t->rcd_last[g.rcd_set_mask ? line & g.rcd_set_mask : (line % g.l1_sets) % g.rcd_sets];
  if (!e) e = t->steps.get(ip);
  if (e) {
    if (last)
      e->rcd[profile::rcd_bucket(ord - last - 1)]++;
    else
      e->rcd_first++;
  }
  last = ord;
}

// Keeps the 64 bytes around `addr`, a miss in a live heap object, for points_into(). Only where
// the access has not happened yet: then the object's page is mapped (the 64-byte block never
// leaves it), and its bytes are what the program is about to read.
void keep_missed_words(ThreadState* t, uint64_t addr) {
  if (t_relay_thread) return;
  std::memcpy(t->missed_words[t->missed_next], reinterpret_cast<const void*>(addr & ~uint64_t(63)), 64);
  t->missed_next ^= 1;
}

// L1 evicted `line` to make room; its tenure touched `mask` (spatial.h). The objects the line
// overlaps are found as record_sharing finds them; pages known to hold no object are skipped.
void note_victim(ThreadState* t, uint64_t line, uint64_t mask, bool serialised) {
  // (Not serialised: counted by the thread, see ThreadState::victims_seen.)
  auto outside = [&] {
    if (serialised) spatial::outside(true);
    else ++t->victims_outside;
  };
  if (serialised) spatial::seen(true);
  else ++t->victims_seen;
  const uint64_t base = line << g.line_shift;
  const uint64_t attaches = object_attaches();
  const uint64_t page = base >> 12;
  auto& clear = t->clear_pages[page_slot(page, ThreadState::kClearPages)];
  if (clear.page_plus_one == page + 1 && clear.epoch == attaches) return outside();
  if (attaches == 0) {  // nothing findable yet (see count_miss_in_object)
    clear = ThreadState::ClearPage{page + 1, attaches};
    return outside();
  }
  // While the process has one thread: the object a miss on this page landed in, when it covers
  // the whole line (then it is the only object there), without the store's locks. Parallel mode:
  // the same, but an eviction is not ordered before a free of its object by the program (as a
  // miss is), so the record may be freed and reused meanwhile: what evicted() needs of it is
  // copied, and used only if no object stopped being live since the cache was last valid, before
  // or during the copy (a free counts in object_detaches() before its record can be reused; the
  // pool's records are never unmapped).
  const bool alone = t->memo != nullptr;
  if ((alone || g.parallel_hits) && !t->relayed) {
    const uint64_t epoch = object_detaches();
    const auto& c = t->objects[page_slot(page, ThreadState::kCachedObjects)];
    if (epoch == t->objects_epoch && c.obj != nullptr && base >= c.start &&
        base + (uint64_t(1) << g.line_shift) <= c.end) {
      if (alone) return spatial::evicted(*c.obj, line, mask, serialised);
      HeapObject o{};
      o.serial = __atomic_load_n(&c.obj->serial, __ATOMIC_RELAXED);
      o.start = __atomic_load_n(&c.obj->start, __ATOMIC_RELAXED);
      o.size = __atomic_load_n(&c.obj->size, __ATOMIC_RELAXED);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (object_detaches() == epoch) return spatial::evicted(o, line, mask, serialised);
    }
  }
  HeapObject objs[4];
  const int n = objects_overlapping(base, base + (uint64_t(1) << g.line_shift), objs, 4);
  if (n == 0) {
    if (page_without_objects(base)) clear = ThreadState::ClearPage{page + 1, attaches};
    return outside();
  }
  for (int i = 0; i < n && i < 4; ++i) spatial::evicted(objs[i], line, mask, serialised);
}

// Parallel mode: a sharing miss of this thread's. Enough of them in few accesses ask for strict
// order (Global::strict); the switch itself happens at each thread's next access (strict_asked).
void ask_strict(ThreadState* t, StrictWhy why) {
  if (g.strict.load(std::memory_order_relaxed) != kStrictNone || !g.relay_parked) return;
  uint64_t made = 0;
  const uint32_t n = std::min(g.next_index.load(std::memory_order_relaxed), kMaxThreads);
  for (uint32_t i = 0; i < n; ++i)
    if (ThreadState* o = g.threads[i].load(std::memory_order_acquire))
      made += __atomic_load_n(&o->accesses, __ATOMIC_RELAXED);
  int none = kStrictNone;
  if (g.strict.compare_exchange_strong(none, kStrictRunning, std::memory_order_acq_rel)) {
    g.strict_at.store(made, std::memory_order_relaxed);  // (for the note, read by finish())
    g.strict_thread.store(t->index, std::memory_order_relaxed);
    g.strict_why.store(int(why), std::memory_order_relaxed);
  }
}

void note_parallel_sharing(ThreadState* t) {
  const uint64_t waited = g.waited_ns.load(std::memory_order_relaxed);
  bool ordered = t->handed_at != 0 && t->accesses + 1 - t->handed_at < kHandedWindow;
  // (Each handed-over section for at most kHandedSection accesses: one another thread unlocked
  // stays listed, and must not exempt its locker for good.)
  for (uint32_t i = 0; !ordered && i < t->nheld; ++i)
    ordered = t->held[i].handed && t->accesses + 1 - t->held[i].at < kHandedSection;
  if (!ordered && (g.turns_always || (waited != 0 && mono_ns() - waited < kStrictTurnsNs)) &&
      ++t->sharing_total >= kStrictSharingInTurns)
    return ask_strict(t, StrictWhy::Turns);
  const uint64_t w = t->accesses / kStrictWindow;
  if (w != t->sharing_window) {
    t->sharing_before = w == t->sharing_window + 1 && t->sharing_run >= kStrictSharing;
    t->sharing_window = w;
    t->sharing_run = 0;
  }
  if (++t->sharing_run == kStrictSharing && t->sharing_before) ask_strict(t, StrictWhy::Rate);
}

// The misses of one access: per-level counts, heap objects, sharing evidence. Out of line so
// that record()'s hit path stays small.
__attribute__((noinline)) void record_misses(ThreadState* t, InstructionRecord* s, uint64_t ip,
                                             uint64_t addr, bool write) {
  const sim::AccessResult& r = t->result;
  const bool serialised = !g.concurrent.load(std::memory_order_relaxed) || g.relay_mode;
  for (uint8_t k = 0; k < r.nlines; ++k) {
    const sim::LineResult& lr = r.lines[k];
    if (lr.level[0] == Outcome::Hit) {
      // A write that took a shared copy from other cores: the object changes hands (flow).
      if (lr.upgrade && write && flow::flow_on()) {
        const uint64_t piece = k == 0 ? addr : lr.line << g.line_shift;
        ObjectHit hit{0, t->index, 0, 0, nullptr, t->core, lr.line, write, true, false};
        count_miss_in_object(t, piece, &hit);
      }
      continue;
    }
    if (serialised) flow::miss(true);
    else ++t->ws_misses;  // (summed by finish)
    if (lr.l1_victim_mask != 0 && spatial::on())
      note_victim(t, lr.l1_victim, lr.l1_victim_mask, serialised);
    size_t reached = lr.levels_reached < g.nlevels ? lr.levels_reached : g.nlevels;
    for (size_t l = 0; l < reached; ++l) {
      if (lr.level[l] == Outcome::Hit) continue;
      t->misses[l]++;
      if (s) s->misses[l][int(lr.level[l])]++;
    }
    const Outcome o = lr.level[0];
    const uint64_t piece = k == 0 ? addr : lr.line << g.line_shift;
    StepTable::Entry* e = k == 0 ? note_step(t, ip, lr.line, addr) : nullptr;
    if (t->rcd_last) note_rcd(t, ip, lr.line, e);
    const uint64_t set = g.l1_set_mask ? lr.line & g.l1_set_mask : lr.line % g.l1_sets;
    const uint64_t set_bit = uint64_t(1) << (set & 63);  // (any set count)
    if (s) s->l1_set_mask |= set_bit;
    if (o == Outcome::Compulsory) {
      // The first touch of a fresh object is usually one: the flow must see it.
      if (flow::flow_on()) {
        ObjectHit hit{int(o), t->index, set_bit, 0, nullptr, t->core, lr.line, write, true, true};
        count_miss_in_object(t, piece, &hit);
      }
      continue;
    }
    // (A full list keeps its addresses: no scan of it per miss.)
    if (s && s->sample_addrs[profile::kRefs - 1] == 0) add_ref(s->sample_addrs, piece);
    ObjectHit hit{int(o), t->index, set_bit, 0, nullptr, t->core, lr.line, write, false, true};
    if (count_miss_in_object(t, piece, &hit)) {
      note_object(s, hit.serial);
      if (k == 0) keep_missed_words(t, addr);
    }
    if (o == Outcome::TrueSharing || o == Outcome::FalseSharing) {
      record_sharing(t, ip, lr, o, write);
      if (g.parallel_hits && !t->relayed) note_parallel_sharing(t);
    }
  }
}

// What Inside does, for the access paths: t_in_runtime is known to be down, and errno lives at
// t->errno_loc, so no __errno_location calls.
template <typename F>
inline void inside(ThreadState* t, F&& f) {
  const int saved_errno = *t->errno_loc;
  t_in_runtime = true;
  f();
  t_in_runtime = false;
  *t->errno_loc = saved_errno;
}

// One access simulated for thread t (instruction ip, its record s, or nullptr when memory ran
// out) with what record() and parallel_access count beside it: the access log, the tracker, the
// thread's and the instruction's access counts. Returns whether it hit L1; a miss is the caller's
// (record_misses). The caller has either the busy flag up or the simulator to itself (the relay,
// a solo owner), and no signal handler of its thread can reach the simulator meanwhile: the ABI
// layer's re-entrancy guard is up (enter_sink), or t_in_runtime. errno is left as found (the
// simulator's and the tracker's allocations go to the private heap by their caller's address and
// keep errno).
__attribute__((always_inline)) inline bool simulate(ThreadState* t, InstructionRecord* s,
                                                    uint64_t ip, uint64_t addr, uint32_t size,
                                                    bool write) {
  // A core an ended thread used (parallel mode): its first-touch set and its record of lost lines
  // are that thread's. Kept, the new thread's first miss on a line the other one had lost to a
  // third thread's write counted as sharing (stress_threads, 256 threads reusing stacks and
  // buffers on 64 cores: true sharing verdicts where strict mode, a fresh core per thread, has
  // compulsory misses). Forgotten here, by the core's feeder (this thread, the relay, or a solo
  // owner) at its first simulated access, with what makes the access safe against finish()
  // (busy up, or the relay's own protocol), not at attach: finish() may drain every inbox
  // meanwhile. (access_rest's one-thread path never sees a reused core: cores are reused only
  // once threads ran, and the simulator stays concurrent from then on.)
  if (__builtin_expect(t->forget_core, 0)) {
    g.sim->forget_history(t->core);
    t->forget_core = false;
  }
  const bool l1_hit = g.sim->access(t->core, addr, size, write, t->result);
  // (Threads simulating at once, locks or parallel: each into its own block. Before, while one
  // thread simulates, in order with the hit path's appends.)
  if (g.no_relay && g.concurrent.load(std::memory_order_relaxed))
    alog::append_own(addr, size, write, t->index);
  else
    alog::append(addr, size, write, t->index);
  reuse::access(ip, addr, size, g.concurrent.load(std::memory_order_relaxed) && !g.relay_mode);
  t->accesses++;
  if (s) s->accesses[write]++;
  return l1_hit;
}

// Returns whether the access hit L1.
inline bool record(ThreadState* t, uint64_t ip, uint64_t addr, uint32_t size, bool write) {
  // The program's own line, as access_rest does for a one-thread program: on a miss in an object
  // keep_missed_words copies it (the thread that makes the access, not the relay), and the
  // program reads it next; loaded while the simulator works, not after it.
  if (!t_relay_thread) __builtin_prefetch(reinterpret_cast<const void*>(addr));
  InstructionRecord* s = t->ips.get(ip);
  const bool l1_hit = simulate(t, s, ip, addr, size, write);
  if (!l1_hit) record_misses(t, s, ip, addr, write);
  return l1_hit;
}

// An access by the thread the relay lent the simulator to (relay.h, "Solo"): simulated here, as
// in a single-threaded program, while the grant holds; pushed once it is revoked. t->memo is set
// while this thread believes it holds the grant; the relay's revocation waits for lane.busy.
inline void access(uintptr_t ret, uintptr_t addr, uint32_t size, bool write);
void pace_movers(ThreadState* t);
// A relayed thread's access that is not a held hit (a push, or one made inline under a solo
// grant): pace_movers' count.
inline void note_fed(ThreadState* t) {
  if (__builtin_expect(g.parallel_hits, 0) && ++t->fed >= t->next_mover_look) pace_movers(t);
}

__attribute__((noinline)) void solo_access(ThreadState* t, uintptr_t ret, uintptr_t addr,
                                           uint32_t size, bool write) noexcept {
  // (A solo grant does not end while a thread that has not moved yet has no lane: so the wait for
  // it is here too.)
  note_fed(t);
  t->lane.busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // paired with the relay's membarrier
  if (relay::solo() == &t->lane) {
    if (!memo_hit(t->memo, &t->ips, &t->accesses, ret, addr, size, write, t->index, false) &&
        !t_in_runtime &&
        size != 0 && g.state.load(std::memory_order_relaxed) == kRecording) {
      inside(t, [&] { record(t, ret ? ret - 1 : 0, addr, size, write); });
    }
    t->lane.busy.store(0, std::memory_order_release);
    return;
  }
  t->lane.busy.store(0, std::memory_order_release);
  t->memo = nullptr;  // revoked: back to the ring
  access(ret, addr, size, write);
}

bool strict_asked(ThreadState* t);
void pace(ThreadState* t);

// Entry for every access that neither the hit path nor access_rest's fast paths took: cheap
// checks, then record() with the busy flag up.
inline void access(uintptr_t ret, uintptr_t addr, uint32_t size, bool write) {
  ThreadState* t = t_state;
  if (__builtin_expect(t == nullptr, 0)) {
    if (g.state.load(std::memory_order_acquire) != kRecording || t_in_runtime) return;
    if (t_unrecorded) {
      g.dropped_accesses.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    t = attach_thread();
    if (!t) return;
  }
  if (t_in_runtime) {  // the program re-entered us (e.g. from a signal handler)
    g.dropped_accesses.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (t->relayed) {
    if (g.state.load(std::memory_order_relaxed) != kRecording) return;
    if (t->lane.ring == nullptr || t->lane.closing.load(std::memory_order_relaxed)) {
      g.dropped_accesses.fetch_add(1, std::memory_order_relaxed);  // no lane, or after its exit
      return;
    }
    // Lent the simulator: simulate inline, once the relay has finished what we pushed (a fence
    // that gave up means recording is stopping: the relay may still be in our ring).
    if (relay::solo() == &t->lane && relay::fence(&t->lane)) {
      t->memo = g.sim->hit_memo(t->core);
      return solo_access(t, ret, addr, size, write);
    }
    // Not lent (any more): a memo left from a revoked loan must not outlive this push, or the
    // next on_access could simulate inline while the relay still drains our ring. (Stored only
    // when set: the relay reads this host line for every access it simulates for us.)
    if (t->memo != nullptr) t->memo = nullptr;
    relay::store_if_changed(t->lane.local, uint8_t{0});
    note_fed(t);
    relay::push(&t->lane, AccessRecord{ret, addr, size, write});
    return;
  }
  if (__builtin_expect(t->accesses >= t->next_pace, 0) && g.parallel_hits) pace(t);
  // Parallel mode after contention: this access, and every later one, goes to the relay.
  if (__builtin_expect(g.strict_after != 0, 0) && t->accesses >= g.strict_after && g.parallel_hits &&
      g.concurrent.load(std::memory_order_relaxed))
    ask_strict(t, StrictWhy::After);
  if (__builtin_expect(g.strict.load(std::memory_order_relaxed) == kStrictRunning, 0) &&
      strict_asked(t))
    return access(ret, addr, size, write);
  t->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // paired with membarrier in finish()
  // (A signal handler's access before `busy` went up may have moved this thread onto the relay:
  // the relay is its core's feeder now, so this access goes there too.)
  if (__builtin_expect(t->relayed, 0)) {
    t->busy.store(0, std::memory_order_release);
    return access(ret, addr, size, write);
  }
  if (g.state.load(std::memory_order_relaxed) == kRecording) {
    inside(t, [&] { record(t, ret ? ret - 1 : 0, addr, size, write); });
  }
  t->busy.store(0, std::memory_order_release);
}

// access() and record() for a parallel-mode thread that owns its simulated core (t->relayed
// false, g.parallel_hits), in one frame: when nothing is due (pacing, the move to strict order)
// and the instruction already has its record, the access is simulated here with the busy flag up
// as access() would, and errno is saved only around a miss (simulate() leaves it
// alone). False, having changed nothing, when access() must take it. Through access(), zstd's
// compressing thread (parallel: its I/O threads run beside it) executed 399 instructions per
// access outside the simulator and the tracker, a one-thread program's lz4 194; this path took
// 44 off (bench/README.md, "Exact mode's instructions per access").
__attribute__((always_inline)) inline bool parallel_access(ThreadState* t, uintptr_t ip,
                                                           uintptr_t addr, uint32_t size,
                                                           bool write) {
  if (__builtin_expect(t->accesses >= t->next_pace, 0) ||
      __builtin_expect(g.strict_after != 0 && t->accesses >= g.strict_after, 0) ||
      __builtin_expect(g.strict.load(std::memory_order_relaxed) == kStrictRunning, 0))
    return false;
  const uint64_t at = ip ? ip - 1 : 0;
  InstructionRecord* s = t->ips.find(at);
  if (s == nullptr) return false;
  t->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // paired with membarrier in finish()
  // (A signal handler's access before `busy` went up may have moved this thread onto the relay,
  // or recording may have stopped: access() sorts both out.)
  if (__builtin_expect(t->relayed || g.state.load(std::memory_order_relaxed) != kRecording, 0)) {
    t->busy.store(0, std::memory_order_release);
    return false;
  }
  __builtin_prefetch(reinterpret_cast<const void*>(addr));  // (see record)
  // (A signal handler cannot simulate on this core while this access is half done: its accesses
  // and its pthread_mutex_* calls take the ABI layer's re-entrancy guard, which is up; enter_sink.)
  const bool hit = simulate(t, s, at, addr, size, write);
  if (!hit) inside(t, [&] { record_misses(t, s, at, addr, write); });
  t->busy.store(0, std::memory_order_release);
  return true;
}

// on_access past its first check. While the process has one thread, an instruction already in
// the table needs no busy flag (no other thread can finish) and no allocation: the simulator is
// asked directly, and only a miss pays for saving errno around record_misses. A parallel-mode
// thread that owns its core goes to parallel_access; everything else to access().
__attribute__((noinline)) void access_rest(uintptr_t ip, uintptr_t addr, uint32_t size,
                                           bool write) noexcept {
  ThreadState* t = t_state;
  if (t != nullptr && t->memo != nullptr && !t->relayed && !t_in_runtime && size != 0) {
    // The program's own line: loaded from host memory while the simulator works, instead of
    // after it (by keep_missed_words' copy on a miss in an object, else by the program). On
    // programs that miss in host memory too (random reads over 32 MiB, a pointer chase) that
    // copy was a fifth of exact mode's time, all of it waiting.
    __builtin_prefetch(reinterpret_cast<const void*>(addr));
    const uint64_t at = ip ? ip - 1 : 0;
    if (InstructionRecord* s = t->ips.find(at)) {
      t->accesses++;
      s->accesses[write]++;
      reuse::access(at, addr, size, false);  // (one thread)
      const bool hit = g.sim->access(t->core, addr, size, write, t->result);
      alog::append(addr, size, write, t->index, true);
      if (hit) return;
      inside(t, [&] { record_misses(t, s, at, addr, write); });
      return;
    }
  }
  if (t != nullptr && g.parallel_hits && !t->relayed && !t_in_runtime && size != 0) {
    if (parallel_access(t, ip, addr, size, write)) return;
  }
  access(ip, addr, size, write);
}

// ---- the relay (multi-threaded programs; relay.h) ----

void relay_simulate(void* owner, const AccessRecord& r) {
  auto* t = static_cast<ThreadState*>(owner);
  t_relay_thread = true;  // (only the relay's thread runs this)
  const bool hit = record(t, r.ip ? r.ip - 1 : 0, r.addr, r.size, r.write != 0);
  const uint64_t line = r.addr >> g.line_shift;
  relay::Lane& l = t->lane;
  relay::store_if_changed(
      l.hit_run, hit && line == l.last_line ? l.hit_run.load(std::memory_order_relaxed) + 1 : 0u);
  l.last_line = line;
}

void relay_retire(void* owner) {
  auto* t = static_cast<ThreadState*>(owner);
  merge_tables(t);
  // Parallel mode after the move to strict order: the relay has simulated all the exited thread
  // pushed and will not lend it the simulator again (a closing lane is taken back first), so its
  // core goes back to the pool (claim_core), as an exiting parallel thread's does; not when the
  // thread died inside a held hit on it (busy still up).
  if (g.parallel_hits && !t->busy.load(std::memory_order_acquire)) release_core(t->core);
}

// Starts the relay and moves the calling thread (the only one recording) onto a ring. Called
// while the process has one recording thread: at init, or in its first pthread_create.
bool start_relay() {
  Inside in;
  if (g.no_relay) return false;
  if (!relay::start(relay::Client{relay_simulate, relay_retire}, g.relay_knobs)) return false;
  if (ThreadState* self = t_state) {
    t_hit = HitPath{};
    self->memo = nullptr;
    self->relayed = true;
    if (!relay::open_lane(&self->lane, self, int(self->tid))) g.threads_no_room.fetch_add(1);
    else enable_held_hits(self);
  }
  g_held_hits.store(g.one_per_core, std::memory_order_release);
  return true;
}

// Parallel mode's pacing. Threads that take turns on the host's CPUs (more runnable threads than
// CPUs, or other processes on them) would each run a time slice (hundreds of thousands of
// accesses) while the others wait, and a line they contend for would then miss once per turn:
// too seldom to ask for strict order before the work is done (the corpus's
// perthread_malloc_main_t4, four threads writing counters two to a line on two vCPUs: no finding
// in 3 of 4 runs, where strict order finds false sharing in every run). So each thread looks at
// the others every kPaceEvery of its accesses: one that made under an eighth as many since the
// last look and is runnable ('R' in /proc: waiting for a CPU, or running code that is not
// recorded) gets this thread's CPU until it has made a quarter as many, as a thread of the strict
// relay waits on a full ring while the relay serves the others. A thread asleep (a lock, a join,
// I/O) is not waited for, nor looked at in /proc again for kPaceAsleep of this thread's accesses
// unless it moves. Once a wait of kPaceGiveUpNs did not bring it that far (code that is not
// recorded, slow misses on another CPU, or no CPU for it: other processes hold them), that one is
// not waited for again for kPaceGiveUpNs, doubling up to kPaceSkipMaxNs while it stays behind,
// as the strict relay skips a dry lane. (The skip was counted in its accesses, 256 Ki of them:
// on a machine whose other processes kept the CPUs busy, a thread that got no CPU for 1 ms was
// not waited for again before the other had run its whole loop, and the run moved to strict
// order with nothing left to contend; docs/parallel-sim.md.) While threads run at once a look
// costs a load of each other thread's count.
constexpr uint64_t kPaceEvery = uint64_t(1) << 16;
constexpr uint64_t kPaceAsleep = uint64_t(1) << 18;
constexpr uint64_t kPaceGiveUpNs = 1000 * 1000;  // (the relay's own wait for a runnable lane)
constexpr uint64_t kPaceSkipMaxNs = 64 * kPaceGiveUpNs;  // (the relay's longest skip)

// Gives up on the thread on core i for a while (pace_skip_*): kPaceGiveUpNs the first time,
// doubling up to kPaceSkipMaxNs while it stays behind.
inline void skip_longer(ThreadState* t, uint32_t i, uint64_t now) {
  uint64_t& skip = t->pace_skip_ns[i];
  skip = skip == 0 ? kPaceGiveUpNs : std::min(2 * skip, kPaceSkipMaxNs);
  t->pace_skip_until[i] = now + skip;
}

// One step of a wait for another thread, round `round` of it. Yield first (the thread behind may
// be waiting for this CPU), then sleep a little (it may be queued on another CPU, where yielding
// here does not help it). No libc call that is a cancellation point (a program may cancel this
// thread): sched_yield is none, and the sleep is the system call itself.
inline void give_way(uint32_t round) {
  if (round < 4) {
    sched_yield();
  } else {
    const timespec step{0, 50 * 1000};
    syscall(SYS_nanosleep, &step, nullptr);
  }
}

// The live thread other than t that owns core i, or nullptr. A new owner since t's last look
// starts over: nothing to compare, no skip.
inline ThreadState* paced_thread(ThreadState* t, uint32_t i) {
  const uint32_t owner = g.core_owner[i].load(std::memory_order_relaxed);
  ThreadState* o = g.threads[owner].load(std::memory_order_acquire);
  if (o == nullptr || o == t || o->core != i || o->exited.load(std::memory_order_relaxed))
    return nullptr;
  if (t->pace_owner[i] != owner + 1) {
    t->pace_owner[i] = owner + 1;
    t->pace_seen[i] = t->pace_asleep[i] = t->pace_skip_until[i] = t->pace_skip_ns[i] = 0;
  }
  return o;
}

__attribute__((noinline)) void pace(ThreadState* t) {
  const uint64_t mine = t->accesses;
  t->next_pace = mine + kPaceEvery;
  if (g.live.load(std::memory_order_relaxed) < 2 ||
      g.strict.load(std::memory_order_relaxed) != kStrictNone || t_in_runtime)
    return;
  Inside in;
  // By simulated core: a thread past the 64th runs on the core of one that exited.
  const uint32_t n = std::min(g.next_index.load(std::memory_order_relaxed), ThreadState::kPaced);
  uint32_t wait_for[ThreadState::kPaced];  // cores
  ThreadState* waited[ThreadState::kPaced];
  uint64_t until[ThreadState::kPaced];
  uint32_t nwait = 0;
  uint64_t looked = 0;  // mono_ns(), once a skip needs it
  for (uint32_t i = 0; i < n; ++i) {
    ThreadState* o = paced_thread(t, i);
    if (o == nullptr) continue;
    // (Its memo hits count: a thread spinning on a flag of ours catches up at once.)
    const uint64_t theirs = __atomic_load_n(&o->accesses, __ATOMIC_RELAXED);
    const uint64_t seen = t->pace_seen[i];
    t->pace_seen[i] = theirs;
    // (No look at it yet: nothing to compare. A thread that just started, or this thread's first
    // look, would otherwise take a count since the start for one since the last look.)
    if (seen == 0) continue;
    const uint64_t moved = theirs - seen;
    if (moved >= kPaceEvery / 8) {
      t->pace_asleep[i] = t->pace_skip_until[i] = t->pace_skip_ns[i] = 0;
      continue;
    }
    if (mine < t->pace_asleep[i]) continue;
    if (t->pace_skip_until[i] != 0) {
      if (looked == 0) looked = mono_ns();
      if (looked < t->pace_skip_until[i]) continue;
    }
    if (!relay::thread_runnable(int(o->tid))) {
      t->pace_asleep[i] = mine + kPaceAsleep;
      continue;
    }
    wait_for[nwait] = i;
    waited[nwait] = o;
    until[nwait++] = theirs + kPaceEvery / 4;
  }
  const uint64_t start = nwait ? mono_ns() : 0;
  for (uint32_t k = 0, round = 0; k < nwait; ++round) {
    ThreadState* o = waited[k];
    if (__atomic_load_n(&o->accesses, __ATOMIC_RELAXED) >= until[k] ||
        o->exited.load(std::memory_order_relaxed) ||
        (round % 8 == 7 && !relay::thread_runnable(int(o->tid)))) {
      ++k;  // it caught up, or does not want a CPU: the next one
      round = 0;
      continue;
    }
    if (g.strict.load(std::memory_order_relaxed) != kStrictNone ||
        g.state.load(std::memory_order_relaxed) != kRecording)
      return;  // (moving to strict order, or finishing: no more waits)
    const uint64_t now = mono_ns();
    if (now - start > kPaceGiveUpNs) {  // this one, and the rest of the list, not for a while
      for (; k < nwait; ++k) skip_longer(t, wait_for[k], now);
      return;
    }
    g.waited_ns.store(now, std::memory_order_relaxed);  // threads take turns (kStrictTurnsNs)
    give_way(round);
  }
}

// Parallel mode, once strict order was asked for: a thread that moved onto the relay waits, as
// pace() does, for a thread that has not moved yet and is runnable. A thread moves at its own next
// access (strict_asked), so one that has no CPU then (other processes hold them) has no lane the
// relay could wait for, and the relay ran the threads that had moved on alone: on two vCPUs beside
// two busy loops, false_sharing_app and false_sharing_alloc then ran their loops one thread after
// the other and lost their sharing verdict in 23 of 120 runs (with this and pace()'s skip by
// time: 2 of 144; strict order from the start: 1 of 72; docs/parallel-sim.md). Each such wait is
// bounded by kPaceGiveUpNs, then skips that thread as pace() does; a thread asleep is not waited
// for (it moves when it wakes), nor looked at again for a while (the same doubling skip). Looks
// every kMoverLookEvery of this thread's accesses that are not held hits (note_fed; the relay
// looks at every access, and a skip of 1 ms ends long before 64 Ki pushes), and no more once
// every thread moved (threads that start afterwards start on the relay).
// (Another thread's flags, which it sets itself in strict_asked.)
inline bool moved_or_kept(const ThreadState* o) {
  return __atomic_load_n(&o->relayed, __ATOMIC_RELAXED) || __atomic_load_n(&o->keep_parallel, __ATOMIC_RELAXED);
}
constexpr uint64_t kMoverLookEvery = 1024;
__attribute__((noinline)) void pace_movers(ThreadState* t) {
  t->next_mover_look = t->fed + kMoverLookEvery;
  if (t_in_runtime || g.state.load(std::memory_order_relaxed) != kRecording) return;
  Inside in;
  bool owed = false;
  const uint32_t n = std::min(g.next_index.load(std::memory_order_relaxed), ThreadState::kPaced);
  for (uint32_t i = 0; i < n; ++i) {
    ThreadState* o = paced_thread(t, i);
    if (o == nullptr || moved_or_kept(o)) continue;
    owed = true;
    const uint64_t start = mono_ns();
    if (start < t->pace_skip_until[i]) continue;
    for (uint32_t round = 0;; ++round) {
      if (moved_or_kept(o) || o->exited.load(std::memory_order_relaxed)) break;
      // Asleep (a main thread in pthread_join: one look per 64 ms), or waited for long enough.
      if (round % 8 == 0 && !relay::thread_runnable(int(o->tid))) {
        skip_longer(t, i, mono_ns());
        break;
      }
      if (g.state.load(std::memory_order_relaxed) != kRecording) return;
      const uint64_t now = mono_ns();
      if (now - start > kPaceGiveUpNs) {
        skip_longer(t, i, now);
        break;
      }
      give_way(round);
    }
  }
  if (!owed) t->next_mover_look = ~uint64_t(0);
}

// Parallel mode, strict order asked for (Global::strict), called by a thread of the parallel mode
// at an access boundary of its own (before an access, or at a synchronisation it makes): moves it
// onto a lane of its own on the relay, parked since the first pthread_create. Its core has no
// access in flight then, so from here on the relay (or a solo grant the relay gives this thread)
// is the core's only feeder, as for a thread that starts relayed; other threads still parallel
// simulate their own cores meanwhile, which the simulator's parallel protocol allows (distinct
// cores at once). Its earlier accesses were simulated before they happened, so none is owed.
// True when the thread now feeds the relay; false when it stays parallel (no lane was left, or
// it is past its exit: instrumented code after our key destructor). Never waits. `busy` is up
// while it moves, so that finish() waits for the move, and Inside from the first check on, so
// that a signal handler's accesses meanwhile are dropped instead of moving it a second time.
__attribute__((noinline)) bool strict_asked(ThreadState* t) {
  if (t_in_runtime) return false;
  Inside in;
  // (`busy` already up: a signal handler's access interrupted one of this thread's own, inline or
  // a memo hit, on its core; the thread moves at its next access instead.)
  if (!g.parallel_hits || t->relayed || t->keep_parallel || t->exited.load(std::memory_order_relaxed) ||
      t->busy.load(std::memory_order_relaxed) || g.strict.load(std::memory_order_acquire) != kStrictRunning)
    return false;
  t->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // paired with membarrier in finish()
  bool moved = false;
  if (g.state.load(std::memory_order_relaxed) == kRecording) {
    t_hit = HitPath{};     // no more memo hits of the parallel kind: held hits, once on the lane
    reuse::thread_done();  // its tracker batch, ahead of what the relay simulates for it
    if (relay::open_lane(&t->lane, t, int(t->tid))) {
      t->self = pthread_self();
      t->relayed = true;
      enable_held_hits(t);
      g.moved.fetch_add(1, std::memory_order_relaxed);
      moved = true;
      // (pace()'s skips are for threads running in parallel; pace_movers starts over.)
      std::fill(std::begin(t->pace_skip_until), std::end(t->pace_skip_until), uint64_t(0));
      std::fill(std::begin(t->pace_skip_ns), std::end(t->pace_skip_ns), uint64_t(0));
    } else {
      t->keep_parallel = true;
      g.kept_parallel.fetch_add(1, std::memory_order_relaxed);
      enable_parallel_hits(t);
    }
  }
  t->busy.store(0, std::memory_order_release);
  return moved;
}

// Parallel mode: starts the relay thread, idle until threads move to it (Global::relay_parked).
// Called where start_relay() would be in strict mode: at init when other threads exist, or in the
// first pthread_create, while the process has one recording thread.
void park_relay() {
  Inside in;
  g.relay_parked = relay::start(relay::Client{relay_simulate, relay_retire}, g.relay_knobs);
  if (!g.relay_parked) g.strict.store(kStrictOff, std::memory_order_relaxed);
}

// ---- the end: export everything and write the profile ----

template <typename T>
T* alloc_array(size_t n) {
  return static_cast<T*>(private_alloc(sizeof(T) * (n ? n : 1)));
}

// This thread stops using the simulator's memo directly (see ThreadState::memo), and so do the
// others' held hits (hit_path.h).
void drop_hit_path() {
  g_held_hits.store(false, std::memory_order_relaxed);
  t_hit = HitPath{};
  if (ThreadState* t = t_state) t->memo = nullptr;
}

void finish(int term_signal) {
  int expected = kRecording;
  const bool nested = t_finishing;  // a signal interrupted this thread's own finish
  t_finishing = true;
  if (!g.state.compare_exchange_strong(expected, kFinished)) {
    // Another thread is writing the profile (a signal on a second thread, or exit() racing a
    // signal): returning would let the caller die by its signal before the profile is on disk.
    if (expected == kFinished && !nested) {
      const timespec step{0, 1000 * 1000};
      for (int i = 0; i < 10000 && !g.written.load(std::memory_order_acquire); ++i)
        syscall(SYS_nanosleep, &step, nullptr);  // (no cancellation point: see pace)
    }
    return;
  }
  drop_hit_path();
  if (getpid() != g.pid) return;
  Inside in;
  // No asynchronous signal interrupts the writing of the profile on this thread (a SIGTERM
  // during exit()'s write would kill the program with the profile half-written, and the write
  // takes a while with the access log): they stay pending and arrive when finish() returns.
  // Synchronous ones cannot wait.
  struct BlockAsync {
    sigset_t old;
    BlockAsync() {
      sigset_t all;
      sigfillset(&all);
      for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&all, sig);
      pthread_sigmask(SIG_BLOCK, &all, &old);
    }
    ~BlockAsync() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
  } block_async;
  // Everything already pushed is simulated before the tables are read. Bounded: the relay may be
  // stuck on a heap lock held by a thread that died mid-hook (then its last accesses are lost).
  // Not when this thread was interrupted inside its own inline (solo) access: the relay would
  // wait for that access to end, which cannot happen before we return. A stalled relay is
  // already done: nothing more is simulated, what it never simulated is counted.
  bool relay_done = false;  // the relay stopped: nothing moves in the simulator any more
  // (Parallel mode: the relay parked at the first pthread_create, moved to or not.)
  const int strict = g.strict.load(std::memory_order_acquire);
  const bool relay_on = g.relay_mode || g.relay_parked;
  if (relay_on && !relay::on_relay_thread()) {
    ThreadState* self = t_state;
    bool done = relay::stalled();
    if (!done && self != nullptr && self->relayed &&
        self->lane.busy.load(std::memory_order_acquire)) {
      relay::abandon();  // it stops at its next check
      done = relay::stop(100);
    } else if (!done) {
      done = relay::stop(5000);
    }
    if (done) g.dropped_accesses.fetch_add(relay::leftover(), std::memory_order_relaxed);
    relay_done = done;
  }
  // Let accesses in flight on other threads complete before their tables are read.
  if (g.membarrier_ok) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  uint32_t nthreads = std::min(g.next_index.load(), kMaxThreads);
  // Decided once, here: a thread still running may raise `busy` again for an access that then
  // changes nothing (recording is over), and a second look could catch it up.
  auto* stuck = alloc_array<uint8_t>(nthreads);
  if (stuck) memset(stuck, 0, nthreads ? nthreads : 1);
  for (uint32_t i = 0; i < nthreads; ++i) {
    ThreadState* t = g.threads[i].load(std::memory_order_acquire);
    if (!t || t == t_state) continue;
    int spin = 0;
    for (; t->busy.load(std::memory_order_acquire) && spin < 200000; ++spin) sched_yield();
    if (stuck) stuck[i] = spin == 200000;
  }
  // Parallel mode: what other cores' accesses did to a core's copies waits in its inbox until
  // that core's thread simulates again, which an exited or idle thread never does; applied now,
  // so that the counters (invalidations, write-backs) are complete. Only at a normal exit (a
  // drain may allocate: not in a signal handler) with no thread inside the simulator: none stuck
  // mid-access, none inside an access of its own on a relay's loan (lane.busy: this thread, if
  // finish() interrupted its own, or the owner a stalled relay gave up on), and the relay stopped.
  if (g.parallel && term_signal == 0 && stuck && (t_state == nullptr || !t_state->busy.load()) &&
      (!relay_on || (relay_done && !relay::stalled()))) {
    bool still = true;
    for (uint32_t i = 0; i < nthreads; ++i) {
      const ThreadState* t = g.threads[i].load(std::memory_order_acquire);
      still = still && !stuck[i] && !(t && t->relayed && t->lane.busy.load(std::memory_order_acquire));
    }
    if (still) g.sim->drain_all();
  }
  auto* threads = alloc_array<profile::ThreadRecord>(nthreads);
  size_t nthr = 0;
  {
    LockGuard lock(g.merged_lock);
    for (uint32_t i = 0; i < nthreads; ++i) {
      ThreadState* t = g.threads[i].load(std::memory_order_acquire);
      if (!t) continue;
      flow::add_misses(t->ws_misses);
      spatial::add(t->victims_seen, t->victims_outside);
      // Stuck mid-access: its table is unsafe.
      if (t != t_state && (stuck ? stuck[i] != 0 : t->busy.load() != 0)) continue;
      g.merged.merge_from(t->ips);
      g.merged_steps.merge_from(t->steps);
      if (threads) {
        profile::ThreadRecord& tr = threads[nthr++];
        tr = {};
        tr.index = t->index;
        tr.tid = t->tid;
        tr.core = t->core;
        tr.accesses = t->accesses;
        for (int l = 0; l < profile::kLevels; ++l) tr.misses[l] = t->misses[l];
      }
    }
  }
  // The working set at the end, only while the simulator is still: the relay stopped, or one
  // thread simulating its own accesses (lock mode: other threads may still be inside it; a relay
  // that did not stop may still be moving lines). final_sample() skips the sample when a walk
  // is in progress (this thread interrupted inside one, by the signal that ends the program).
  if ((g.relay_mode && relay_done) || (!g.relay_mode && !g.concurrent.load(std::memory_order_relaxed)))
    flow::final_sample();
  sim::Counters c = g.sim->counters();
  profile::CounterRecord counters[profile::kLevels] = {};
  profile::LevelRecord levels[profile::kLevels] = {};
  const CacheGeometry& geo = g.sim->geometry();
  for (size_t l = 0; l < g.nlevels; ++l) {
    std::memcpy(counters[l].by_kind, c.level[l].by_outcome, sizeof counters[l].by_kind);
    counters[l].writebacks = c.level[l].writebacks;
    counters[l].upgrades = c.level[l].upgrades;
    counters[l].coherence_invalidations = c.level[l].coherence_invalidations;
    counters[l].back_invalidations = c.level[l].back_invalidations;
    levels[l].size = geo.levels[l].size;
    levels[l].ways = geo.levels[l].ways;
    levels[l].line = geo.levels[l].line;
    std::strncpy(levels[l].name, geo.levels[l].name.c_str(), sizeof levels[l].name - 1);
  }
  constexpr size_t kMaxModules = 1024, kStringBytes = 1 << 20;
  StringTable strings{alloc_array<char>(kStringBytes), 0, kStringBytes};
  auto* modules = alloc_array<profile::ModuleRecord>(kMaxModules);
  size_t nmodules = 0;
  profile::MetaRecord meta{};
  if (modules && strings.data) {
    meta.command_str = strings.add(g.command);
    meta.geometry_source_str = strings.add(g.geometry_source);
    nmodules = list_modules(modules, kMaxModules, strings);
  } else {
    meta.command_str = meta.geometry_source_str = profile::kNoString;
  }
  size_t nlines_cap = g.lines.size();
  auto* lines = alloc_array<LineRecord>(nlines_cap);
  size_t nlines = lines ? g.lines.export_to(lines, nlines_cap) : 0;
  size_t nobj_cap = object_count_with_misses();
  auto* objects = alloc_array<profile::ObjectRecord>(nobj_cap);
  size_t nobj = objects ? export_objects(objects, nobj_cap) : 0;
  size_t nsite_cap = site_count();
  auto* sites = alloc_array<profile::SiteRecord>(nsite_cap);
  size_t nsites = sites ? export_sites(sites, nsite_cap) : 0;

  meta.mode = uint32_t(profile::Mode::Exact);
  meta.cores = g.one_per_core ? 0 : g.cores;  // (one per thread, up to g.cores: see the notes)
  meta.policy = g.policy;
  meta.inclusive_llc = g.inclusive;
  meta.term_signal = term_signal;
  meta.pid = uint64_t(g.pid);
  meta.start_ns = g.start_ns;
  meta.end_ns = now_ns();
  meta.accesses = c.accesses;
  meta.dropped_accesses = g.dropped_accesses.load();
  meta.dropped_records = g.merged.dropped() + g.lines.dropped() + dropped_objects() + g.merged_steps.dropped();
  auto* steps = alloc_array<profile::StepRecord>(g.merged_steps.size());
  if (steps) g.merged_steps.export_to(steps);
  // Per-set counts and re-conflict distances (the `sets` view), when counted.
  profile::SetCountRecord* set_recs = nullptr;
  size_t nset_recs = 0;
  profile::RcdRecord* rcd_recs = nullptr;
  size_t nrcd = 0;
  if (g.count_sets) {
    const size_t cap = g.sim->set_count_capacity();
    auto* sc = alloc_array<sim::SetCount>(cap);
    set_recs = alloc_array<profile::SetCountRecord>(cap);
    if (sc && set_recs) {
      nset_recs = g.sim->set_counts(sc, cap);
      for (size_t i = 0; i < nset_recs; ++i) {
        set_recs[i].level = sc[i].level;
        set_recs[i].set = sc[i].set;
        for (int o = 0; o < profile::kKinds; ++o) set_recs[i].by_kind[o] = sc[i].by_outcome[o];
      }
    }
    rcd_recs = alloc_array<profile::RcdRecord>(g.merged_steps.size());
    if (rcd_recs) nrcd = g.merged_steps.export_rcd(rcd_recs, uint32_t(g.rcd_sets));
  }
  meta.threads_seen = nthreads;
  meta.folded = !g.one_per_core && nthreads > g.cores;
  // At most one of the first group below, and one per counter after it: 5 (room for more).
  profile::NoteRecord notes[8];
  size_t nnotes = 0;
  if (nthreads > 1 && g.concurrent.load(std::memory_order_relaxed) && !g.relay_mode && strings.data) {
    // Why the sharing counts may differ from run to run: no relay put the threads' accesses in
    // turn (WHYMISS_INTERLEAVE=locks, asked for: information; or the relay could not start).
    const uint32_t moved = g.moved.load(std::memory_order_relaxed);
    const uint32_t kept = g.kept_parallel.load(std::memory_order_relaxed);
    if (g.parallel && strict == kStrictRunning && (moved != 0 || kept != 0)) {
      char text[768];
      int n = std::snprintf(text, sizeof text,
                    "threads simulated their own accesses in parallel (--interleave parallel) until thread %u's %s, after about %llu accesses; from then on the relay put them in turn, access by access, as in strict mode (the sharing counted before that depends on how the threads ran)",
                    g.strict_thread.load(std::memory_order_relaxed),
                    strict_why_text(StrictWhy(g.strict_why.load(std::memory_order_relaxed))),
                    (unsigned long long)g.strict_at.load(std::memory_order_relaxed));
      // (A thread that found no lane went on simulating its own accesses: its sharing with the
      // others stays in host order, which the reader must be told.)
      if (kept != 0 && n > 0 && size_t(n) < sizeof text)
        std::snprintf(text + n, sizeof text - size_t(n),
                      "; but %u of %u threads found no relay lane (out of memory or lanes) and went on in parallel, in host order",
                      kept, moved + kept);
      notes[nnotes++] = {strings.add(text), kept != 0 ? 1u : 0u};
    } else if (g.parallel)
      notes[nnotes++] = {strings.add("threads simulated their own accesses in parallel (--interleave parallel): they interleave in host order, not access by access, so sharing counts depend on how the threads ran (--interleave strict puts them in turn, access by access)"), 0};
    else if (g.no_relay)
      notes[nnotes++] = {strings.add("threads simulated their own accesses under locks (WHYMISS_INTERLEAVE=locks): they interleave in host order, not access by access, so sharing counts depend on how the threads ran"), 0};
    else
      notes[nnotes++] = {strings.add("the relay thread could not start: threads simulated their own accesses under locks, in host order, not access by access, so sharing counts depend on how the threads ran"), 1};
  }
  if (uint64_t n = g.threads_without_core.load(); n && strings.data) {
    char text[768];
    std::snprintf(text, sizeof text, "%llu thread%s not recorded (%s accesses are dropped): %s",
                  (unsigned long long)n, n == 1 ? " was" : "s were", n == 1 ? "its" : "their",
                  g.core_refusal);
    notes[nnotes++] = {strings.add(text), 1};
  }
  if (uint64_t n = g.threads_raw_clone.load(); n && strings.data) {
    char text[384];
    std::snprintf(text, sizeof text,
                  "%llu thread%s not recorded (%s accesses are dropped): started without pthread_create (a raw clone) while the program had one thread, when the simulator ran without locks",
                  (unsigned long long)n, n == 1 ? " was" : "s were", n == 1 ? "its" : "their");
    notes[nnotes++] = {strings.add(text), 1};
  }
  if (uint64_t n = g.threads_no_room.load(); n && strings.data) {
    char text[384];
    std::snprintf(text, sizeof text,
                  "%llu thread%s not recorded (%s accesses are dropped): no memory, no relay lane or no thread slot was left for %s (a run records at most %u threads)",
                  (unsigned long long)n, n == 1 ? " was" : "s were", n == 1 ? "its" : "their", n == 1 ? "it" : "them", kMaxThreads);
    notes[nnotes++] = {strings.add(text), 1};
  }
  if (uint64_t n = g.threads_past_cores.load(); n && strings.data) {  // (see attach_thread)
    char text[384];
    if (g.parallel_hits)
      std::snprintf(text, sizeof text,
                    "%llu thread%s not recorded (%s accesses are dropped): parallel mode simulates at most %u threads at once, one core each (a later thread takes the core of one that ended); --interleave strict records up to %u",
                    (unsigned long long)n, n == 1 ? " was" : "s were", n == 1 ? "its" : "their", g.cores, kMaxCores);
    else
      std::snprintf(text, sizeof text,
                    "%llu thread%s past the first %u %s not recorded (%s accesses are dropped): one simulated core per thread, at most %u",
                    (unsigned long long)n, n == 1 ? "" : "s", g.cores, n == 1 ? "was" : "were", n == 1 ? "its" : "their", g.cores);
    notes[nnotes++] = {strings.add(text), 1};
  }
  profile::SectionData s[] = {
      {profile::Section::Meta, sizeof meta, 1, &meta},
      {profile::Section::Levels, sizeof(profile::LevelRecord), g.nlevels, levels},
      {profile::Section::Counters, sizeof(profile::CounterRecord), g.nlevels, counters},
      {profile::Section::Strings, 1, strings.len, strings.data},
      {profile::Section::Modules, sizeof(profile::ModuleRecord), nmodules, modules},
      {profile::Section::Threads, sizeof(profile::ThreadRecord), nthr, threads},
      {profile::Section::Instructions, sizeof(InstructionRecord), g.merged.size(), g.merged.records()},
      {profile::Section::Lines, sizeof(LineRecord), nlines, lines},
      {profile::Section::Objects, sizeof(profile::ObjectRecord), nobj, objects},
      {profile::Section::Sites, sizeof(profile::SiteRecord), nsites, sites},
      {profile::Section::MissSteps, sizeof(profile::StepRecord), steps ? g.merged_steps.size() : 0, steps},
      {profile::Section::Notes, sizeof(profile::NoteRecord), nnotes, notes},
  };
  // Then the CPU-time samples' sections (cpu_sampler.h), after whatever the list above holds.
  constexpr size_t kBase = sizeof s / sizeof s[0];
  profile::SectionData all[kBase + cpu::kSections + 1 + 2 + 4 + 2 + 2 + 1];
  std::memcpy(all, s, sizeof s);
  uint32_t nsections = uint32_t(kBase + cpu::export_sections(all + kBase, strings));
  // And the reuse-distance histograms (reuse.h), when the tracker ran.
  if (const size_t nreuse = reuse::record_count())
    if (auto* reuse_recs = alloc_array<profile::ReuseRecord>(nreuse))
      all[nsections++] = {profile::Section::Reuse, sizeof(profile::ReuseRecord),
                          reuse::export_records(reuse_recs, nreuse), reuse_recs};
  // How each of those histograms was obtained (rate, accesses the tracker could not follow).
  if (const size_t ninfo = reuse::info_count())
    if (auto* info = alloc_array<profile::ReuseInfoRecord>(ninfo))
      all[nsections++] = {profile::Section::ReuseInfo, sizeof(profile::ReuseInfoRecord),
                          reuse::export_info(info, ninfo), info};
  // And the access log (access_log.h), when it ran.
  profile::AccessLogRecord log_info{};
  if (alog::g_log.capacity) {
    log_info.capacity = alog::g_log.capacity;
    log_info.kept = alog::kept();
    log_info.total = c.accesses > log_info.kept ? c.accesses : log_info.kept;
    log_info.line = uint32_t(1) << g.line_shift;
    all[nsections++] = {profile::Section::AccessLog, sizeof log_info, 1, &log_info};
    all[nsections++] = {profile::Section::AccessLogEntries, sizeof(uint64_t), log_info.kept,
                        alog::g_log.entries};
  }
  // The data flow and working-set sections (dataflow.h), when they ran.
  profile::FlowInfoRecord flow_info = flow::flow_info();
  profile::WorkingSetInfoRecord ws_info = flow::working_set_info();
  if (flow::flow_on()) {
    const size_t cap = flow::flow_count();
    auto* recs = alloc_array<profile::FlowRecord>(cap);
    const size_t n = recs ? flow::export_flows(recs, cap) : 0;
    all[nsections++] = {profile::Section::FlowInfo, sizeof flow_info, 1, &flow_info};
    all[nsections++] = {profile::Section::Flows, sizeof(profile::FlowRecord), n, recs};
  }
  if (flow::working_set_on()) {
    const size_t cap = flow::working_set_count();
    auto* recs = alloc_array<profile::WorkingSetRecord>(cap);
    const size_t n = recs ? flow::export_working_set(recs, cap) : 0;
    all[nsections++] = {profile::Section::WorkingSetInfo, sizeof ws_info, 1, &ws_info};
    all[nsections++] = {profile::Section::WorkingSet, sizeof(profile::WorkingSetRecord), n, recs};
  }
  if (nset_recs || nrcd) {
    all[nsections++] = {profile::Section::SetCounts, sizeof(profile::SetCountRecord), nset_recs, set_recs};
    all[nsections++] = {profile::Section::Rcd, sizeof(profile::RcdRecord), nrcd, rcd_recs};
  }
  // Spatial use (spatial.h), when it ran.
  profile::ObjectUseInfoRecord use_info = spatial::info();
  if (spatial::on()) {
    const size_t cap = spatial::count();
    auto* recs = alloc_array<profile::ObjectUseRecord>(cap);
    const size_t n = recs ? spatial::export_records(recs, cap) : 0;
    all[nsections++] = {profile::Section::ObjectUseInfo, sizeof use_info, 1, &use_info};
    all[nsections++] = {profile::Section::ObjectUse, sizeof(profile::ObjectUseRecord), n, recs};
  }
  note_profile_written(profile::write_profile_sections(g.output, all, nsections));
  g.written.store(true, std::memory_order_release);
}

__attribute__((destructor(101))) void runtime_dtor() { finish(0); }

void after_fork_child() {
  g.state.store(kDisabled);  // the child runs unprofiled; its parent keeps the profile
  drop_hit_path();
  g.merged_lock.reset();
  heap_after_fork_child();
}

}  // namespace

// ---- the sink the compiler-facing ABI layer calls ----
void on_access(uintptr_t ip, uintptr_t addr, uint32_t size, bool write) noexcept {
  // The hit path (an access to the line this thread touched last, while the process has one
  // thread) was already tried inline by the ABI entry (hit_path.h). Here: a thread the relay lent
  // the simulator to, or everything else, as a tail call.
  ThreadState* t = t_state;
  if (__builtin_expect(t != nullptr, 1) && t->memo != nullptr && t->relayed)
    return solo_access(t, ip, addr, size, write);
  access_rest(ip, addr, size, write);
}

void on_range(uintptr_t ip, uintptr_t addr, size_t size, bool write) noexcept {
  // Ranges (memcpy, memset, struct copies) become line-sized accesses, as vector code does. Each
  // takes the path of an ordinary access of its size: the hit path first, then on_access. (They
  // went to access() directly: lz4's unaligned loads are 4- and 8-byte memcpys, two thirds of its
  // accesses, and each paid the busy flag, the errno save and the state checks that the hit path
  // and access_rest spare a one-thread program.)
  const uint64_t line = uint64_t(1) << g.line_shift;
  while (size > 0) {
    uint64_t chunk = line - (addr & (line - 1));
    if (chunk > size) chunk = size;
    if (!take_hit(ip, addr, uint32_t(chunk), write)) on_access(ip, addr, uint32_t(chunk), write);
    addr += chunk;
    size -= chunk;
  }
}

void on_init() noexcept { init(); }

// The program is about to free or move a heap block: its accesses still in the relay's ring are
// simulated first, while the object they touched is still registered.
void heap_detach_fence() noexcept {
  ThreadState* t = t_state;
  if (t != nullptr && t->lane.ring != nullptr && !t->lane.closing.load(std::memory_order_relaxed))
    relay::fence(&t->lane);
}

// ---- used by the heap code ----
uint32_t current_thread_index() noexcept {
  if (t_state) return t_state->index;
  ThreadState* t = attach_thread();
  return t ? t->index : 0;
}
bool in_runtime() noexcept { return t_in_runtime; }
bool set_in_runtime(bool inside) noexcept {
  bool was = t_in_runtime;
  t_in_runtime = inside;
  return was;
}
bool recording() noexcept { return g.state.load(std::memory_order_relaxed) == kRecording; }

// Thread indices are handed out at pthread_create, in creation order, so threads map to
// simulated cores the same way in every run of a deterministic program.
void preassign_thread_index(uint32_t index_plus_one) noexcept {
  t_preassigned = index_plus_one;
  // Sampled from its start, also if it never runs instrumented code (all its work in a library).
  if (g.state.load(std::memory_order_acquire) == kRecording) {
    Inside in;
    cpu::thread_start(index_plus_one - 1);
  }
}
//
// It is also the hook that turns the simulator's locks on: pthread_create calls it in the
// creating thread before the new thread exists. While the simulator runs without locks the
// process has one thread (ours), so no access is in flight on another thread, and the new
// thread is ordered after this store by pthread_create (Hierarchy::set_concurrent's contract).
uint32_t next_thread_index() noexcept {
  if (!g.concurrent.load(std::memory_order_relaxed) &&
      g.state.load(std::memory_order_acquire) == kRecording) {
    drop_hit_path();
    g.relay_mode = start_relay();
    if (!g.relay_mode) g.sim->set_concurrent(true);  // no relay thread: locks instead
    if (g.parallel_hits) {  // (drop_hit_path cleared it: the memo hits go on, in parallel style)
      g_held_hits.store(true, std::memory_order_relaxed);
      if (ThreadState* self = t_state) enable_parallel_hits(self);
      park_relay();
    }
    g.concurrent.store(true, std::memory_order_release);
  }
  const uint32_t index = g.next_index.fetch_add(1);
  if (index < kMaxThreads)
    g.parent_mark[index].store(sync_mark(t_state), std::memory_order_relaxed);
  return index + 1;
}

// Release and acquire by atomic operations (access_sink.h). A release stores this thread's mark
// before the operation publishes, so an acquire that reads what it published finds it. A slot
// keeps one mark: a later release to the same address, or a hash collision, replaces it, and an
// acquirer then waits for that one instead (order may be lost that way, never progress: every
// mark names a position already pushed). An operation that also acquires first waits for the
// mark it replaces, so that its own mark covers that wait (chains of read-modify-writes).
// Not while this thread is inside the runtime (a signal handler's atomics during a push of ours).
constexpr uint64_t kCalled = uint64_t(1) << 63;  // in sync_before's answer: never in a mark
// Parallel mode with strict order asked for: a thread that acquires moves onto its lane first
// (strict_asked), so that its next accesses wait for what a relayed thread released (a thread
// without a lane has no sync mark and waits for nothing).
// Every acquire also ends the thread's access-log block (alog::seal: the log keeps hand-overs in
// order; a no-op for a thread that does not log into blocks of its own). `acquired`: after the
// acquire, not before an operation that will acquire (sync_before).
inline void strict_sync(ThreadState* t, bool acquired = true) {
  alog::seal(acquired);
  if (__builtin_expect(g.strict.load(std::memory_order_relaxed) == kStrictRunning, 0) &&
      t != nullptr && !t->relayed && !t_in_runtime)
    strict_asked(t);
}
// (errno: depend_on only pushes, and a push preserves it.)
uint64_t sync_before(uintptr_t addr, bool acquires) noexcept {
  ThreadState* t = t_state;
  if (acquires) strict_sync(t, false);
  const uint64_t mark = t_in_runtime ? 0 : sync_mark(t);
  if (mark == 0) return 0;
  std::atomic<uint64_t>& slot = sync_slot(addr);
  if (!acquires) return slot.exchange(mark, std::memory_order_relaxed) | kCalled;
  // The mark put in must cover the wait for exactly the one it replaces: another thread's release
  // between the two would otherwise be neither waited for nor covered.
  uint64_t old = slot.load(std::memory_order_relaxed);
  for (;;) {
    depend_on(t, old);
    if (slot.compare_exchange_weak(old, sync_mark(t), std::memory_order_relaxed)) break;
  }
  return old | kCalled;
}
void sync_after(uintptr_t addr) noexcept {
  ThreadState* t = t_state;
  strict_sync(t);
  if (t_in_runtime || sync_mark(t) == 0) return;
  depend_on(t, sync_slot(addr).load(std::memory_order_relaxed));
}
// A compare-exchange that failed released nothing: the mark it replaced goes back, unless
// another release has replaced ours meanwhile.
void sync_undo(uintptr_t addr, uint64_t before) noexcept {
  ThreadState* t = t_state;
  const uint64_t mine = sync_mark(t);
  if (t_in_runtime || mine == 0) return;
  std::atomic<uint64_t>& slot = sync_slot(addr);
  uint64_t cur = slot.load(std::memory_order_relaxed);
  if ((cur >> kPosBits) == (mine >> kPosBits))
    slot.compare_exchange_strong(cur, before & ~kCalled, std::memory_order_relaxed);
}

// Synchronisation the ABI does not see (sync_hooks.cpp): the same as sync_before/sync_after for
// an operation that only releases, or only acquires.
namespace {
// Parallel mode: who released each mutex last, hashed by address and tagged with it: the slot
// holds (addr >> 3) << 20 | (thread index + 1). A slot another mutex took over meanwhile makes a
// lock look not handed over, the cautious side (its misses count, see kStrictSharingInTurns).
constexpr unsigned kReleaserBits = 10;
constexpr unsigned kReleaserIndexBits = 20;  // (kMaxThreads is far below 2^20)
constinit std::atomic<uint64_t> g_releaser[1u << kReleaserBits] = {};
std::atomic<uint64_t>& releaser_slot(uintptr_t addr) {
  return g_releaser[((addr >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - kReleaserBits)];
}
uint64_t releaser_tag(uintptr_t addr) {
  return (addr >> 3) & ((uint64_t(1) << (64 - kReleaserIndexBits)) - 1);
}
// Only while parallel mode can still move (after that the rule is moot), and only for the
// thread's own fields (a relayed thread's `accesses` is the relay's to write).
bool follows_locks(const ThreadState* t) {
  return t != nullptr && g.parallel_hits && !t_in_runtime && !t->relayed &&
         g.strict.load(std::memory_order_relaxed) == kStrictNone;
}
// The thread took the mutex at `addr` (a lock, or a condition wait's return).
void note_lock_taken(ThreadState* t, uintptr_t addr) {
  const uint64_t last = releaser_slot(addr).load(std::memory_order_relaxed);
  const uint64_t index_mask = (uint64_t(1) << kReleaserIndexBits) - 1;
  const bool handed = last != 0 && (last >> kReleaserIndexBits) == releaser_tag(addr) &&
                      (last & index_mask) != t->index + 1;
  if (t->nheld < ThreadState::kHeld) t->held[t->nheld++] = {addr, t->accesses + 1, handed};
  if (handed) t->handed_at = t->accesses + 1;
}
// The thread is about to release the mutex at `addr`. Locks need not be released in the order
// they were taken: the innermost entry for `addr` goes. (One another thread unlocks stays listed
// for its locker: kHandedSection bounds what that exempts.)
void note_lock_released(ThreadState* t, uintptr_t addr) {
  for (uint32_t i = t->nheld; i-- > 0;) {
    if (t->held[i].addr != addr) continue;
    for (uint32_t j = i + 1; j < t->nheld; ++j) t->held[j - 1] = t->held[j];
    --t->nheld;
    break;
  }
  const uint64_t mine = releaser_tag(addr) << kReleaserIndexBits | (t->index + 1);
  std::atomic<uint64_t>& slot = releaser_slot(addr);
  if (slot.load(std::memory_order_relaxed) != mine)  // (no store, and no line taken, if unchanged)
    slot.store(mine, std::memory_order_relaxed);
}
}  // namespace

void release_point(uintptr_t addr) noexcept {
  if (ThreadState* t = t_state; follows_locks(t)) note_lock_released(t, addr);
  sync_before(addr, false);
}
void acquire_point(uintptr_t addr) noexcept {
  if (ThreadState* t = t_state; follows_locks(t)) note_lock_taken(t, addr);
  strict_sync(t_state);
  if (t_in_runtime || sync_mark(t_state) == 0) return;
  Inside in;  // errno kept; a signal handler's accesses meanwhile stay out of the ring
  depend_on(t_state, sync_slot(addr).load(std::memory_order_relaxed));
}

// pthread_join returned: the joined thread's accesses come before the joiner's next ones.
void after_join(pthread_t th) noexcept {
  ThreadState* self = t_state;
  if (follows_locks(self)) self->handed_at = self->accesses + 1;
  strict_sync(self);
  if (sync_mark(self) == 0) return;
  // Newest first: a pthread_t may be reused once its thread has been joined. (Not only the
  // first g.cores indices: in parallel mode a later thread can have an ended thread's core.)
  const uint32_t n = std::min(g.next_index.load(), kMaxThreads);
  for (uint32_t i = n; i-- > 0;) {
    ThreadState* t = g.threads[i].load(std::memory_order_acquire);
    if (t == nullptr || t == self || !pthread_equal(t->self, th)) continue;
    const uint64_t mark = t->final_mark.load(std::memory_order_acquire);
    if (mark == 0) continue;
    if (t_in_runtime) return;  // (a signal handler's join while this thread was in the runtime)
    Inside in;  // errno kept; a signal handler's accesses meanwhile stay out of the ring
    depend_on(self, mark);
    return;
  }
}

}  // namespace whymiss::rt

