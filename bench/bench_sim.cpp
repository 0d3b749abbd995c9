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
//   bench_sim [--reps N] [--n ACCESSES] [--miss-n ACCESSES] [--only TEXT] [--locks N]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

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

double run_once(const Case& c, int locks, double* l1_hit_ratio) {
  sim::Knobs k;
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
  return 0;
}
