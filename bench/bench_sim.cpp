// Simulator throughput: accesses per second on one thread for L1-hit-dominated and
// miss-dominated traces, with and without the concurrency locks. Addresses are generated before
// timing; each case runs --reps times (default 3) on a fresh hierarchy and the median is shown.
// The miss-dominated traces are --miss-n accesses long (default: a tenth of --n), since each of
// their accesses costs ~50x a hit; the whole run takes well under a minute.
// Accesses go through the overload exact mode uses (bool access(..., AccessResult&)); build with
// -DBENCH_SIM_RESULT_API to use the older AccessResult-returning one (to compare with old trees).
// Time is the thread's CPU time, not wall time, so that other processes sharing the machine
// (builds on a 2-core VM) distort the numbers less; they still compete for caches.
// --only TEXT runs only the traces whose name contains TEXT (for profiling one of them).
// --locks N runs lock modes 0..N only (0: none, the single-threaded case).
// --cores N simulates N cores (default 1; every access is still core 0's): with more than one,
// the simulator keeps its directory of private copies, as exact mode (1024 cores) does.
// After the table, the costs the parallel simulator's design rests on (docs/parallel-sim.md,
// section 3): a locked read-modify-write on one thread, and two threads (pinned to host CPUs 0
// and 1 when there are two) handing one line back and forth, or messages through sim::Inbox.
// Best of 200 chunks, as preemption on a shared VM inflates means several times. Wall time.
//   bench_sim [--reps N] [--n ACCESSES] [--miss-n ACCESSES] [--only TEXT] [--locks N] [--cores N]
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sim/inbox.h"
#include "sim/sim.h"

using namespace whymiss;

namespace {

struct Case {
  const char* name;
  std::vector<uint64_t> addrs;
};

CacheGeometry zen5() {
  CacheGeometry g;
  g.levels = {{"L1", 48 * 1024, 12, 64}, {"L2", 1024 * 1024, 16, 64}, {"L3", 32u << 20, 16, 64}};
  return g;
}

std::vector<Case> make_cases(size_t n, size_t miss_n) {
  std::vector<Case> cs;
  std::mt19937_64 rng(7);
  const uint64_t base = 0x7f0000000000ull;
  {  // 8-byte loads walking a 16 KiB array over and over: the shape of a hot inner loop.
    Case c{"L1-hit: sequential 8B over 16 KiB", {}};
    for (size_t i = 0; i < n; ++i) c.addrs.push_back(base + (i * 8) % (16 * 1024));
    cs.push_back(std::move(c));
  }
  {  // Random 8-byte loads within 32 KiB: L1 hits, but never the same line twice in a row.
    Case c{"L1-hit: random 8B within 32 KiB", {}};
    for (size_t i = 0; i < n; ++i) c.addrs.push_back(base + (rng() % 4096) * 8);
    cs.push_back(std::move(c));
  }
  {  // 16 lines 4 KiB apart, round robin: one L1 set of 12 ways overflows, L2 holds them all.
    // The shape of conflict_alloc: every access is an L1 conflict miss that hits L2.
    Case c{"L1-conflict: 16 lines 4 KiB apart", {}};
    for (size_t i = 0; i < n; ++i) c.addrs.push_back(base + (i % 16) * 4096 + (i / 16 % 8) * 8);
    cs.push_back(std::move(c));
  }
  {  // Random lines over 1 GiB: misses at every level.
    Case c{"miss: random lines over 1 GiB", {}};
    for (size_t i = 0; i < miss_n; ++i) c.addrs.push_back(base + (rng() % (1ull << 24)) * 64);
    cs.push_back(std::move(c));
  }
  {  // Streaming 64 MiB: L1/L2/L3 capacity misses.
    Case c{"miss: sequential lines over 64 MiB", {}};
    for (size_t i = 0; i < miss_n; ++i) c.addrs.push_back(base + (i % (1u << 20)) * 64);
    cs.push_back(std::move(c));
  }
  return cs;
}

// Lock modes: none (the trace simulator), shard locks only (one thread per core, exact mode's
// default), shard + per-core locks (threads folded onto cores).
const char* kLockNames[] = {"none", "shard", "shard+core"};

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

uint32_t g_cores = 1;

double run_once(const Case& c, int locks, double* l1_hit_ratio) {
  sim::Knobs k;
  k.cores = g_cores;
  k.concurrent = locks > 0;
  k.one_thread_per_core = locks == 1;
  // WHYMISS_SETS=0: without the per-set counts (to measure what they cost).
  if (const char* sc = std::getenv("WHYMISS_SETS"); sc && std::string(sc) == "0") k.count_sets = false;
  auto h = std::move(sim::Hierarchy::create(zen5(), k).value());
  sim::AccessResult r;
  uint64_t reported = 0;  // keeps the results live
  const double t0 = cpu_seconds();
  for (size_t i = 0; i < c.addrs.size(); ++i) {
#ifdef BENCH_SIM_RESULT_API
    r = h->access(0, c.addrs[i], 8, (i & 7) == 0);
    reported += r.lines[0].levels_reached > 1;
#else
    if (!h->access(0, c.addrs[i], 8, (i & 7) == 0, r)) reported += r.nlines;
#endif
  }
  const double t1 = cpu_seconds();
  auto ct = h->counters();
  *l1_hit_ratio = double(ct.level[0].hits()) / double(ct.level[0].accesses());
  if (reported > c.addrs.size()) std::abort();  // at most one reported piece per 8-byte access
  return double(c.addrs.size()) / (t1 - t0);
}

// ---- two-thread costs ----

constexpr int kChunks = 200, kPerChunk = 1000;

double wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

void pin(int cpu) {
  if (std::thread::hardware_concurrency() < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Runs a(i) on this thread (pinned to CPU 0, timed) and b(i) on another (CPU 1) for i in
// [0, kChunks x kPerChunk); returns the best chunk's ns per step over `per_step` steps.
template <typename A, typename B>
double two_threads(A&& a, B&& b, double per_step) {
  std::thread other([&] {
    pin(1);
    for (int i = 0; i < kChunks * kPerChunk; ++i) b(i);
  });
  pin(0);
  double best = 1e30;
  for (int c = 0; c < kChunks; ++c) {
    const double t0 = wall_ns();
    for (int i = c * kPerChunk; i < (c + 1) * kPerChunk; ++i) a(i);
    best = std::min(best, (wall_ns() - t0) / (kPerChunk * per_step));
  }
  other.join();
  return best;
}

void print_costs() {
  std::printf("\n| cost (best of %d chunks of %d) | ns |\n|---|---|\n", kChunks, kPerChunk);
  {  // One thread: an uncontended lock cmpxchg and a release store, i.e. a spin lock's pair.
    alignas(64) std::atomic<uint32_t> word{0};
    double best = 1e30;
    for (int c = 0; c < kChunks; ++c) {
      const double t0 = wall_ns();
      for (int i = 0; i < kPerChunk; ++i) {
        uint32_t z = 0;
        while (!word.compare_exchange_weak(z, 1, std::memory_order_acquire)) z = 0;
        word.store(0, std::memory_order_release);
      }
      best = std::min(best, (wall_ns() - t0) / kPerChunk);
    }
    std::printf("| lock cmpxchg + release store, one thread | %.1f |\n", best);
  }
  {  // One line written in turn: thread t waits for an even/odd count, then bumps it.
    alignas(64) std::atomic<uint64_t> turn{0};
    auto step = [&](uint64_t me) {
      return [&, me](int i) {
        const uint64_t want = 2 * uint64_t(i) + me;
        while (turn.load(std::memory_order_acquire) != want) __builtin_ia32_pause();
        turn.store(want + 1, std::memory_order_release);
      };
    };
    std::printf("| hand-over of one line written in turn by two threads | %.1f |\n",
                two_threads(step(0), step(1), 2));
  }
  {  // Messages: A posts to B's inbox, B drains it and posts one back; per message, one way.
    sim::Inbox in_a(64), in_b(64);
    alignas(64) std::atomic<uint32_t> pending_a{0};
    alignas(64) std::atomic<uint32_t> pending_b{0};
    uint64_t sum_a = 0, sum_b = 0;
    auto side = [&](sim::Inbox& mine, std::atomic<uint32_t>& my_pending, sim::Inbox& theirs,
                    std::atomic<uint32_t>& their_pending, uint64_t& sum, bool first) {
      return [&, first](int i) {
        sim::Message m;
        m.line = uint64_t(i);
        if (first) theirs.post(m, their_pending);
        while (my_pending.load(std::memory_order_acquire) == 0) __builtin_ia32_pause();
        mine.drain(my_pending, [&](const sim::Message& x) { sum += x.line; });
        if (!first) theirs.post(m, their_pending);
      };
    };
    const double ns = two_threads(side(in_a, pending_a, in_b, pending_b, sum_a, true),
                                  side(in_b, pending_b, in_a, pending_a, sum_b, false), 2);
    if (in_a.dropped() + in_b.dropped() != 0 || sum_a != sum_b) std::abort();
    std::printf("| message posted to an inbox and drained by the other thread | %.1f |\n", ns);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  size_t n = 20'000'000, miss_n = 0;
  const char* only = "";
  int max_locks = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--n")) n = std::max<size_t>(1000, std::strtoull(argv[i + 1], nullptr, 10));
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--locks")) max_locks = std::min(2, std::max(0, std::atoi(argv[i + 1])));
    else if (!std::strcmp(argv[i], "--cores")) g_cores = uint32_t(std::max(1, std::atoi(argv[i + 1])));
    else if (!std::strcmp(argv[i], "--miss-n")) miss_n = std::max<size_t>(1000, std::strtoull(argv[i + 1], nullptr, 10));
  }
  if (miss_n == 0) miss_n = std::max<size_t>(1000, n / 10);
  std::printf("| trace | L1 hit ratio | locks | M accesses/s (median of %d) | min | max |\n", reps);
  std::printf("|---|---|---|---|---|---|\n");
  for (const Case& c : make_cases(n, miss_n)) {
    if (!std::strstr(c.name, only)) continue;
    for (int locks = 0; locks <= max_locks; ++locks) {
      std::vector<double> r;
      double hit = 0;
      for (int i = 0; i < reps; ++i) r.push_back(run_once(c, locks, &hit) / 1e6);
      std::sort(r.begin(), r.end());
      std::printf("| %s | %.3f | %s | %.1f | %.1f | %.1f |\n", c.name, hit, kLockNames[locks],
                  r[r.size() / 2], r.front(), r.back());
    }
  }
  if (!*only) print_costs();
  return 0;
}
