// Coherence between simulated cores: false vs true sharing, upgrades, downgrades, concurrency.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {
using testing::geo;
using testing::make;
using testing::misses;

CacheGeometry small() {
  return geo({{"L1", 1024, 2, 64}, {"L2", 4096, 4, 64}, {"L3", 16384, 4, 64}});
}

Knobs cores(uint32_t n) {
  Knobs k;
  k.cores = n;
  return k;
}

// Knobs::parallel fed one access at a time by the test (no locks).
Knobs parallel_serial(uint32_t n) {
  Knobs k = cores(n);
  k.parallel = true;
  k.concurrent = false;
  return k;
}

TEST(SimCoherence, WritesToDifferentBytesOfOneLineAreFalseSharing) {
  auto h = make(small(), cores(2));
  const int n = 50;
  for (int i = 0; i < n; ++i) {
    h->access(0, 0x1000, 8, true);      // bytes 0-7
    h->access(1, 0x1000 + 8, 8, true);  // bytes 8-15
  }
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::Compulsory), 2u);
  EXPECT_EQ(misses(c, 0, Outcome::FalseSharing), 2u * n - 2);
  EXPECT_EQ(misses(c, 0, Outcome::TrueSharing), 0u);
  EXPECT_EQ(misses(c, 1, Outcome::FalseSharing), 2u * n - 2);  // L2 is private too
  EXPECT_EQ(c.level[2].misses(), 1u);  // the shared level keeps the line
  EXPECT_EQ(c.level[0].coherence_invalidations, 2u * n - 1);
}

TEST(SimCoherence, WritesToTheSameBytesAreTrueSharing) {
  auto h = make(small(), cores(2));
  const int n = 50;
  for (int i = 0; i < n; ++i) {
    h->access(0, 0x1000, 8, true);
    h->access(1, 0x1004, 4, true);  // overlaps bytes 4-7
  }
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::TrueSharing), 2u * n - 2);
  EXPECT_EQ(misses(c, 0, Outcome::FalseSharing), 0u);
}

TEST(SimCoherence, ReaderOfWrittenWordSeesTrueSharingAndWriterUpgrades) {
  auto h = make(small(), cores(2));
  h->access(0, 0x2000, 8, true);               // core 0: M
  auto r1 = h->access(1, 0x2000, 8, false);    // core 1 reads: both S, core 0's data written back
  EXPECT_EQ(r1.lines[0].level[0], Outcome::Compulsory);
  auto w = h->access(0, 0x2000, 8, true);      // core 0 writes its shared copy: upgrade, a hit
  EXPECT_EQ(w.lines[0].level[0], Outcome::Hit);
  EXPECT_EQ(w.lines[0].upgrade, 1u);
  EXPECT_EQ(w.lines[0].invalidated, 1u);
  auto r2 = h->access(1, 0x2000, 8, false);    // core 1 re-reads what core 0 wrote
  EXPECT_EQ(r2.lines[0].level[0], Outcome::TrueSharing);
  auto c = h->counters();
  EXPECT_EQ(c.level[0].upgrades, 1u);
  // Core 0's dirty copy was written back at both of core 1's reads (M -> S).
  EXPECT_EQ(c.level[0].writebacks, 2u);
}

TEST(SimCoherence, ReaderOfOtherBytesSeesFalseSharing) {
  auto h = make(small(), cores(2));
  h->access(1, 0x2000 + 32, 8, false);         // core 1 reads bytes 32-39
  h->access(0, 0x2000, 8, true);               // core 0 writes bytes 0-7: invalidates core 1
  auto r = h->access(1, 0x2000 + 32, 8, false);
  EXPECT_EQ(r.lines[0].level[0], Outcome::FalseSharing);
}

TEST(SimCoherence, PreviousTenureBytesCount) {
  // Core 1 read bytes 0-7 earlier in its tenure and now reads 32-39: a write to 0-7 by core 0
  // in between is true sharing (core 1 had used those bytes).
  auto h = make(small(), cores(2));
  h->access(1, 0x2000, 8, false);
  h->access(1, 0x2000 + 32, 8, false);
  h->access(0, 0x2000, 8, true);
  auto r = h->access(1, 0x2000 + 32, 8, false);
  EXPECT_EQ(r.lines[0].level[0], Outcome::TrueSharing);
}

TEST(SimCoherence, ReadSharingCausesNoCoherenceMisses) {
  auto h = make(small(), cores(4));
  for (int i = 0; i < 100; ++i)
    for (uint32_t core = 0; core < 4; ++core) h->access(core, 0x3000 + (i % 8) * 8, 8, false);
  auto c = h->counters();
  EXPECT_EQ(c.level[0].misses(), 4u);  // one compulsory miss per core
  EXPECT_EQ(c.level[0].coherence_invalidations, 0u);
}

TEST(SimCoherence, ExclusiveLineIsWrittenSilently) {
  auto h = make(small(), cores(2));
  h->access(0, 0x4000, 8, false);  // E: no other holder
  auto w = h->access(0, 0x4000, 8, true);
  EXPECT_EQ(w.lines[0].level[0], Outcome::Hit);
  EXPECT_EQ(w.lines[0].upgrade, 0u);
  EXPECT_EQ(h->counters().level[0].upgrades, 0u);
}

TEST(SimCoherence, EvictedLineIsNotACoherenceMissLater) {
  // Core 1's copy leaves its private caches by capacity before core 0 writes: no invalidation
  // reaches core 1, so its next miss is capacity/conflict, not sharing.
  auto h = make(small(), cores(2));
  h->access(1, 0x8000, 8, false);
  for (uint64_t i = 1; i <= 200; ++i) h->access(1, 0x8000 + i * 64, 8, false);  // 12.8K > L2
  h->access(0, 0x8000, 8, true);
  auto r = h->access(1, 0x8000, 8, false);
  EXPECT_NE(r.lines[0].level[0], Outcome::FalseSharing);
  EXPECT_NE(r.lines[0].level[0], Outcome::TrueSharing);
  EXPECT_NE(r.lines[0].level[0], Outcome::Hit);
}

TEST(SimCoherence, ConcurrentThreadsKeepCountsConsistent) {
  // Each thread feeds its own core; lines overlap across threads so coherence paths run
  // concurrently under the shard locks.
  const uint32_t nthreads = 4;
  const int per_thread = 50000;
  auto h = make(small(), cores(nthreads));
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      uint64_t x = 88172645463325252ull + t;
      for (int i = 0; i < per_thread; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        h->access(t, 0x10000 + (x % 4096) * 8, 8, (x >> 20) % 3 == 0);
      }
    });
  for (auto& th : ts) th.join();
  auto c = h->counters();
  EXPECT_EQ(c.accesses, uint64_t(nthreads) * per_thread);
  EXPECT_EQ(c.level[0].accesses(), c.line_accesses);
  EXPECT_EQ(c.level[1].accesses(), c.level[0].misses());
  EXPECT_EQ(c.level[2].accesses(), c.level[1].misses());
  EXPECT_GT(misses(c, 0, Outcome::FalseSharing) + misses(c, 0, Outcome::TrueSharing), 0u);
}

// A core a new thread takes over (exact mode's parallel mode reuses the cores of ended threads):
// forget_history makes the new thread's first miss on a line compulsory, as on a fresh core, even
// for a line the thread before lost to another core's write (a posted invalidation included);
// lines still in its caches stay hits; later misses are classified again as usual.
TEST(SimCoherence, AForgottenCoresFirstMissOnALineIsCompulsory) {
  for (bool forget : {false, true}) {
    auto h = make(small(), parallel_serial(2));
    const uint64_t x = 0x6000, y = 0x9000;
    h->access(0, x, 8, false);  // the thread before: reads x and y on core 0
    h->access(0, y, 8, false);
    h->access(1, x, 8, true);   // core 1 writes x: an invalidation waits in core 0's inbox
    if (forget) EXPECT_TRUE(h->forget_history(0));  // a new thread on core 0
    auto r = h->access(0, x, 8, false);
    EXPECT_EQ(r.lines[0].level[0], forget ? Outcome::Compulsory : Outcome::TrueSharing);
    const uint64_t l1_misses = h->counters().level[0].misses();
    h->access(0, y, 8, false);  // still in core 0's L1: a hit either way
    EXPECT_EQ(h->counters().level[0].misses(), l1_misses);
    // From then on the new thread's own history counts: core 1 writes x again, and core 0's next
    // read is a sharing miss.
    h->access(1, x, 8, true);
    auto again = h->access(0, x, 8, false);
    EXPECT_EQ(again.lines[0].level[0], Outcome::TrueSharing);
    h->drain_all();
    EXPECT_EQ(h->messages_dropped(), 0u);
  }
}

// Threads folded onto cores under locks: the caller cannot be the core's only user, so nothing
// is forgotten.
TEST(SimCoherence, ForgetHistoryRefusesWhenCoresAreShared) {
  Knobs k = cores(2);
  k.parallel = true;  // concurrent, one_thread_per_core off: not lock-free
  auto h = make(small(), k);
  h->access(0, 0x6000, 8, false);
  h->access(1, 0x6000, 8, true);
  EXPECT_FALSE(h->forget_history(0));
  EXPECT_EQ(h->access(0, 0x6000, 8, false).lines[0].level[0], Outcome::TrueSharing);
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

TEST(SimCoherence, SharingMissCarriesItsEvidence) {
  auto h = testing::make(small(), cores(3));
  h->access(1, 0x5000 + 16, 8, false);          // core 1 touches bytes 16-23
  h->access(2, 0x5000 + 40, 4, true);           // core 2 writes bytes 40-43: invalidates core 1
  auto r = h->access(1, 0x5000 + 16, 8, false);
  ASSERT_EQ(r.lines[0].level[0], Outcome::FalseSharing);
  EXPECT_EQ(r.lines[0].writer_core, 2u);
  EXPECT_EQ(r.lines[0].writer_mask, 0xFull << 40);
  EXPECT_EQ(r.lines[0].tenure_mask, 0xFFull << 16);
  EXPECT_EQ(r.lines[0].access_mask, 0xFFull << 16);
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

// One thread per core (exact mode's default: no per-core lock), hits on private lines mixed with
// writes to lines every thread writes. Counts must stay consistent.
TEST(SimCoherence, OneThreadPerCoreKeepsCountsConsistent) {
  const uint32_t nthreads = 4;
  const int per_thread = 50000;
  Knobs k = cores(nthreads);
  k.one_thread_per_core = true;
  auto h = make(small(), k);
  std::vector<std::thread> ts;
  std::atomic<uint32_t> ready{0};
  for (uint32_t t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      uint64_t x = 88172645463325252ull + t;
      AccessResult r;
      ready++;
      while (ready.load() < nthreads) std::this_thread::yield();  // overlap as much as we can
      for (int i = 0; i < per_thread; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        // Mostly this thread's own 8 lines (hits), sometimes lines all threads write.
        const uint64_t a = (x % 8 == 0) ? 0x10000 + (x >> 8) % 512 * 8
                                        : 0x40000 * (t + 1) + (x >> 8) % 64 * 8;
        h->access(t, a, 8, (x >> 20) % 3 == 0, r);
      }
    });
  for (auto& th : ts) th.join();
  auto c = h->counters();
  EXPECT_EQ(c.accesses, uint64_t(nthreads) * per_thread);
  EXPECT_EQ(c.level[0].accesses(), c.line_accesses);
  EXPECT_EQ(c.level[1].accesses(), c.level[0].misses());
  EXPECT_EQ(c.level[2].accesses(), c.level[1].misses());
  // (How many sharing misses there are depends on how the threads overlapped.)
}

// Two threads take turns writing different bytes of one line; between turns each keeps hitting
// its own lines while the other thread's write invalidates its copy of the shared line. The
// turns make the shared line's history deterministic: every write after the first by each
// thread is a false-sharing miss, and the private lines never miss again. (Guards any future
// fast path for hits that bypasses the shard lock.)
TEST(SimCoherence, HitsDuringSnoopsKeepExactKinds) {
  Knobs k = cores(2);
  k.one_thread_per_core = true;
  auto h = make(geo({{"L1", 32768, 8, 64}, {"L2", 262144, 8, 64}, {"L3", 1 << 20, 16, 64}}), k);
  const int rounds = 2000;
  std::atomic<int> turn{0};
  std::atomic<uint64_t> private_misses{0}, shared_fs{0};
  auto worker = [&](uint32_t me) {
    AccessResult r;
    const uint64_t mine = 0x100000 * (me + 1);
    for (int k = 0; k < 8; ++k) h->access(me, mine + k * 64, 8, true, r);  // first touches
    for (int i = 0; i < rounds; ++i) {
      while (turn.load(std::memory_order_acquire) % 2 != int(me)) {
        for (int k = 0; k < 8; ++k)
          if (!h->access(me, mine + k * 64, 8, k % 2 == 0, r)) private_misses++;
      }
      if (!h->access(me, 0x300000 + me * 8, 8, true, r) &&
          r.lines[0].level[0] == Outcome::FalseSharing)
        shared_fs++;
      turn.fetch_add(1, std::memory_order_release);
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(private_misses.load(), 0u);
  EXPECT_EQ(shared_fs.load(), uint64_t(2 * rounds - 2));
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::FalseSharing), uint64_t(2 * rounds - 2));
  EXPECT_EQ(misses(c, 0, Outcome::TrueSharing), 0u);
  EXPECT_EQ(misses(c, 0, Outcome::Compulsory), 2u * 8 + 2);
}

// HitMemo::holds, exact mode's held hits (src/runtime/exact/hit_path.h): true only for an access
// that needs no change to the simulator's state, and false as soon as another core's access took
// the line away or downgraded it. It never changes anything itself.
TEST(SimCoherence, HeldHitsNeedTheLineTheTouchedBytesAndForWritesAModifiedCopy) {
  auto h = make(small(), cores(2));
  HitMemo* m = h->hit_memo(0);
  h->access(0, 0x1000, 8, false);  // core 0 reads bytes 0-7: E, clean
  EXPECT_TRUE(m->holds(0x1000, 8, false));
  EXPECT_TRUE(m->holds(0x1004, 4, false));   // bytes it already touched
  EXPECT_FALSE(m->holds(0x1008, 8, false));  // new bytes: the tenure mask would change
  EXPECT_FALSE(m->holds(0x1000, 8, true));   // a write would make it M and dirty
  EXPECT_FALSE(m->holds(0x1040, 8, false));  // another line
  EXPECT_FALSE(m->holds(0x0ffc, 8, false));  // straddles into the line before

  h->access(0, 0x1000, 8, true);  // now M and dirty
  EXPECT_TRUE(m->holds(0x1000, 8, true));
  EXPECT_TRUE(m->holds(0x1002, 2, true));
  const auto before = h->counters();
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(m->holds(0x1000, 8, i % 2 == 0));
  const auto after = h->counters();
  EXPECT_EQ(after.level[0].accesses(), before.level[0].accesses());
  EXPECT_EQ(after.level[0].hits(), before.level[0].hits());

  h->access(1, 0x1000, 8, false);  // core 1 reads: core 0's copy is downgraded to S
  EXPECT_FALSE(m->holds(0x1000, 8, true));
  h->access(1, 0x1008, 8, true);  // core 1 writes: core 0's copy is gone
  EXPECT_FALSE(m->holds(0x1000, 8, false));
  EXPECT_FALSE(m->holds(0x1000, 8, true));
  // Core 0 reads again (a sharing miss): held again, for reads.
  h->access(0, 0x1000, 8, false);
  EXPECT_TRUE(m->holds(0x1000, 8, false));
  EXPECT_FALSE(m->holds(0x1000, 8, true));
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

bool holds_in_l1(const Hierarchy& h, uint32_t core, uint64_t line) {
  struct Q {
    uint32_t core;
    uint64_t line;
    bool found;
  } q{core, line, false};
  h.for_each_line(
      [](size_t level, uint32_t c, uint64_t ln, void* arg) {
        auto* x = static_cast<Q*>(arg);
        if (level == 0 && c == x->core && ln == x->line) x->found = true;
      },
      &q);
  return q.found;
}

// Knobs::parallel, step by step (docs/parallel-sim.md, section 4, step 3 (b)): another core's
// write posts an invalidation instead of touching this core's arrays; until this core's next
// access applies it, the copy is still there but the memo refuses to hit on it; that access is
// then the sharing miss the direct protocol gives, with the writer's evidence. A read of a
// modified line by a third core posts a downgrade and fills S.
// Knobs::parallel: readers that take a line and leave it in turn send its first holder one
// downgrade, not one each. The directory remembers that the holders are shared, so a core that
// does not run meanwhile (its messages wait in its inbox) cannot be sent more messages than two
// per line it holds, which is what the inbox's capacity is sized for.
TEST(SimCoherence, ParallelReadersTakingALineInTurnSendOneDowngrade) {
  for (bool inclusive : {true, false}) {
    SCOPED_TRACE(inclusive ? "inclusive" : "non-inclusive");
    Knobs k = cores(4);
    k.parallel = true;
    k.inclusive_llc = inclusive;
    auto h = make(small(), k);
    const uint64_t x = 0x40000;
    h->access(0, x, 8, false);  // core 0: E
    for (uint32_t reader = 1; reader < 4; ++reader) {
      h->access(reader, x, 8, false);
      // The reader's L2 set of x (4 ways, 16 sets: lines 1 KiB apart) fills with other lines.
      for (uint64_t i = 1; i <= 8; ++i) h->access(reader, x + i * 1024, 8, false);
      EXPECT_EQ(h->sharers(x / 64), uint64_t(1)) << "reader " << reader << " left x";
    }
    EXPECT_EQ(h->hit_memo(0)->pending.load(), 1u);  // the first reader's downgrade, only
    h->drain_all();
    EXPECT_EQ(h->messages_dropped(), 0u);
  }
}

TEST(SimCoherence, ParallelInvalidationsWaitInTheInboxUntilTheCoresNextAccess) {
  for (bool overlap : {false, true}) {
    auto h = make(small(), parallel_serial(3));
    const uint64_t x = 0x6000, line = x / 64;
    h->access(1, x + 16, 8, false);                 // core 1 reads bytes 16-23: E
    HitMemo* m1 = h->hit_memo(1);
    EXPECT_TRUE(m1->try_hit(x + 16, 8, false));     // its memo hits (pending == 0)
    const uint32_t woff = overlap ? 20 : 40;
    auto w = h->access(0, x + woff, 4, true);       // core 0 writes: one invalidation posted
    EXPECT_EQ(w.lines[0].invalidated, 1u);
    EXPECT_EQ(h->sharers(line), 1u);                // the directory already names core 0 only
    EXPECT_EQ(m1->pending.load(), 1u);
    EXPECT_TRUE(holds_in_l1(*h, 1, line));          // the copy is still in core 1's arrays...
    EXPECT_FALSE(m1->try_hit(x + 16, 8, false));    // ...but the memo does not hit on it
    EXPECT_FALSE(m1->holds(x + 16, 8, false));
    EXPECT_EQ(h->counters().level[0].coherence_invalidations, 0u);  // not applied yet
    auto r = h->access(1, x + 16, 8, false);        // applied first, then this access
    EXPECT_EQ(m1->pending.load(), 0u);
    EXPECT_EQ(r.lines[0].level[0], overlap ? Outcome::TrueSharing : Outcome::FalseSharing);
    EXPECT_EQ(r.lines[0].writer_core, 0u);
    EXPECT_EQ(r.lines[0].writer_mask, 0xFull << woff);
    EXPECT_EQ(r.lines[0].tenure_mask, 0xFFull << 16);
    EXPECT_EQ(h->counters().level[0].coherence_invalidations, 1u);
    EXPECT_EQ(h->sharers(line), 0b011u);            // core 1's read downgraded core 0: both S
    EXPECT_EQ(h->hit_memo(0)->pending.load(), 1u);  // the downgrade, for core 0
    // A read by core 2 finds two holders, both S already: no message, and an S fill (its write
    // is then an upgrade that invalidates both).
    h->access(2, x, 8, false);
    EXPECT_EQ(h->hit_memo(0)->pending.load(), 1u);
    EXPECT_EQ(h->hit_memo(1)->pending.load(), 0u);
    auto u = h->access(2, x, 8, true);
    EXPECT_EQ(u.lines[0].upgrade, 1u);
    EXPECT_EQ(u.lines[0].invalidated, 2u);
    h->drain_all();
    EXPECT_EQ(h->messages_dropped(), 0u);
    // Core 0's dirty copy was written back when it applied the downgrade: L1 (its write) only.
    EXPECT_EQ(h->counters().level[0].writebacks, 1u);
  }
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

// Knobs::parallel with threads (step 3 (c)): four threads, each feeding its own core, in rounds
// separated by a spin barrier (no sleeps): each round every thread hits its private lines and
// reads and writes a few lines all threads share. Messages cross between the threads while they
// run. Afterwards every access is counted once, no message was dropped, and the directory still
// names exactly the holders. Run in a build with -fsanitize=thread (cmake
// -DWHYMISS_SANITIZE=thread) it also checks that no thread touches another core's state.
TEST(SimParallel, ThreadsExchangeMessagesAndCountEveryAccess) {
  const uint32_t nthreads = 4;
  const int rounds = 300, private_per_round = 64, shared_per_round = 8;
  Knobs k = cores(nthreads);
  k.parallel = true;
  k.one_thread_per_core = true;
  auto h = make(small(), k);
  for (uint32_t t = 0; t < nthreads; ++t) ASSERT_TRUE(h->add_core(t).ok());
  std::atomic<uint32_t> arrived{0};
  auto barrier = [&](uint32_t round) {
    arrived.fetch_add(1);
    while (arrived.load() < nthreads * (round + 1)) std::this_thread::yield();
  };
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      AccessResult r;
      uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1);
      for (int round = 0; round < rounds; ++round) {
        for (int i = 0; i < private_per_round; ++i)
          h->access(t, 0x100000 * (t + 1) + (i % 8) * 64 + (i % 4) * 8, 8, i % 3 == 0, r);
        for (int i = 0; i < shared_per_round; ++i) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          h->access(t, 0x80000 + (x % 16) * 64 + t * 8, 8, (x >> 32) % 2 == 0, r);
        }
        barrier(uint32_t(round));
      }
    });
  for (auto& th : ts) th.join();
  h->drain_all();
  EXPECT_EQ(h->messages_dropped(), 0u);
  const Counters c = h->counters();
  EXPECT_EQ(c.accesses, uint64_t(nthreads) * rounds * (private_per_round + shared_per_round));
  EXPECT_EQ(c.level[0].accesses(), c.line_accesses);
  EXPECT_EQ(c.level[1].accesses(), c.level[0].misses());
  EXPECT_EQ(c.level[2].accesses(), c.level[1].misses());
  EXPECT_GT(misses(c, 0, Outcome::FalseSharing), 0u);  // the shared lines' bytes are per thread
  EXPECT_GT(c.level[0].coherence_invalidations, 0u);
  // Every invalidation applied removed a copy that a sharing miss or nothing (the line left
  // otherwise first) followed: at most one sharing miss per invalidation.
  EXPECT_LE(misses(c, 0, Outcome::FalseSharing) + misses(c, 0, Outcome::TrueSharing),
            c.level[0].coherence_invalidations);
  std::vector<uint64_t> want(16, 0);
  struct Ctx {
    std::vector<uint64_t>* want;
  } ctx{&want};
  h->for_each_line(
      [](size_t level, uint32_t core, uint64_t ln, void* arg) {
        const uint64_t first = 0x80000 / 64;
        if (level == 1 && core != Hierarchy::kSharedLevel && ln >= first && ln < first + 16)
          (*static_cast<Ctx*>(arg)->want)[ln - first] |= uint64_t(1) << core;
      },
      &ctx);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_EQ(h->sharers(0x80000 / 64 + i), want[i]) << "line " << i;
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

// Lock mode: the directory starts at the first access of a second core, while the first core's
// thread goes on simulating. It is filled from the first core's copies under every stripe lock;
// afterwards it must name exactly the cores whose last private level holds each line, as a scan
// of every core says, for both directory homes (the inclusive shared level's entries, tables).
TEST(SimCoherence, TheDirectoryStartedWhileTheFirstCoreRunsNamesEveryCopy) {
  for (bool inclusive : {true, false}) {
    SCOPED_TRACE(inclusive ? "inclusive" : "non-inclusive");
    Knobs k = cores(4);
    k.inclusive_llc = inclusive;
    k.concurrent = true;
    auto h = make(small(), k);
    // 48 lines: more than L1 holds, fewer than L2, so the first core's copies from before the
    // start stay there to the end, where the check below looks; the second core only reads
    // (downgrading the first core's modified copies), so it takes none of them away.
    const uint64_t base = 0x100000, lines = 48;
    std::atomic<uint64_t> first_done{0};
    auto worker = [&](uint32_t core, uint64_t seed, bool first) {
      uint64_t x = seed;
      for (int i = 0; i < 60000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        h->access(core, base + (x % lines) * 64 + (x >> 40) % 8 * 8, 8,
                  first && (x >> 20) % 3 == 0);
        if (first) first_done.store(uint64_t(i), std::memory_order_relaxed);
      }
    };
    std::thread a(worker, 2, 88172645463325252ull, true);
    // The second core starts once the first has filled its private levels (no sleep: a count).
    while (first_done.load(std::memory_order_relaxed) < 20000) std::this_thread::yield();
    std::thread b(worker, 0, 1442695040888963407ull, false);
    a.join();
    b.join();
    std::vector<uint64_t> want(lines, 0);
    struct Ctx { std::vector<uint64_t>* want; uint64_t base_line, lines; size_t last; };
    Ctx ctx{&want, base / 64, lines, h->geometry().levels.size() - 2};
    h->for_each_line(
        [](size_t level, uint32_t c, uint64_t ln, void* arg) {
          auto* x = static_cast<Ctx*>(arg);
          if (level == x->last && c != Hierarchy::kSharedLevel && ln - x->base_line < x->lines)
            (*x->want)[ln - x->base_line] |= uint64_t(1) << (c % 64);
        },
        &ctx);
    size_t held_by_first = 0;
    for (uint64_t i = 0; i < lines; ++i) {
      ASSERT_EQ(h->sharers(base / 64 + i), want[i]) << "line " << i;
      held_by_first += (want[i] >> 2) & 1;
    }
    EXPECT_GT(held_by_first, lines / 2);  // the first core's copies were checked too
  }
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

// Knobs::parallel with one thread per core is lock-free (no stripe lock): each thread simulates
// its own core's private levels alone and takes a shared-level part lock only for misses, writes
// to S/E copies and its L2 victims. Four threads, each sweeping a private region larger than its
// L2 (victims leave through the directory) while the four regions together exceed the shared
// level (its evictions back-invalidate other threads' copies by message), and all of them reading
// and writing a hot shared region, with line-straddling accesses. Afterwards, for an inclusive
// and a non-inclusive shared level: every access was counted once, no message was dropped, the
// directory names exactly the holders, and (inclusive) every private copy is in the shared
// level. Run it in a -fsanitize=thread build to check that no thread writes another core's state.
TEST(SimParallel, LockFreeCoresKeepTheDirectoryAndInclusionWhileEvicting) {
  for (bool inclusive : {true, false}) {
    SCOPED_TRACE(inclusive ? "inclusive" : "non-inclusive");
    const uint32_t nthreads = 4;
    const int rounds = 200, per_round = 400;
    Knobs k = cores(nthreads);
    k.parallel = true;
    k.one_thread_per_core = true;
    k.inclusive_llc = inclusive;
    auto h = make(small(), k);
    for (uint32_t t = 0; t < nthreads; ++t) ASSERT_TRUE(h->add_core(t).ok());
    const uint64_t hot = 0x80000, hot_lines = 16, region_lines = 96;
    std::atomic<uint32_t> arrived{0};
    std::vector<std::thread> ts;
    for (uint32_t t = 0; t < nthreads; ++t)
      ts.emplace_back([&, t] {
        AccessResult r;
        uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1);
        const uint64_t mine = 0x1000000 * (t + 1);
        for (int round = 0; round < rounds; ++round) {
          for (int i = 0; i < per_round; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const bool w = (x >> 40) % 3 == 0;
            if (x % 4 == 0)  // a hot line: some bytes of its own, some everyone's
              h->access(t, hot + (x >> 8) % hot_lines * 64 + ((x >> 20) % 2 ? t * 8 : 0), 8, w, r);
            else if (x % 16 == 1)  // straddles two private lines
              h->access(t, mine + (x >> 8) % region_lines * 64 + 60, 8, w, r);
            else
              h->access(t, mine + (x >> 8) % region_lines * 64 + (x >> 16) % 8 * 8, 8, w, r);
          }
          arrived.fetch_add(1);
          while (arrived.load() < nthreads * uint32_t(round + 1)) std::this_thread::yield();
        }
      });
    for (auto& th : ts) th.join();
    h->drain_all();
    EXPECT_EQ(h->messages_dropped(), 0u);
    const Counters c = h->counters();
    EXPECT_EQ(c.accesses, uint64_t(nthreads) * rounds * per_round);
    EXPECT_EQ(c.level[0].accesses(), c.line_accesses);
    EXPECT_EQ(c.level[1].accesses(), c.level[0].misses());
    EXPECT_EQ(c.level[2].accesses(), c.level[1].misses());
    EXPECT_GT(c.level[1].back_invalidations + c.level[0].back_invalidations, 0u);
    EXPECT_GT(c.level[0].coherence_invalidations, 0u);
    EXPECT_GT(c.level[0].upgrades, 0u);
    struct Ctx {
      std::map<uint64_t, uint64_t> holders;
      std::set<uint64_t> shared;
    } ctx;
    h->for_each_line(
        [](size_t level, uint32_t core, uint64_t ln, void* arg) {
          auto* x = static_cast<Ctx*>(arg);
          if (core == Hierarchy::kSharedLevel) x->shared.insert(ln);
          else if (level == 1) x->holders[ln] |= uint64_t(1) << core;
        },
        &ctx);
    for (const auto& [ln, want] : ctx.holders) {
      if (inclusive) {
        ASSERT_TRUE(ctx.shared.count(ln)) << "line " << ln << " held but not in L3";
      }
    }
    EXPECT_GT(ctx.holders.size(), 100u);
    // Every line the threads used, held or not: a directory bit for a core without the line
    // (a lost message) shows here.
    std::vector<uint64_t> used;
    for (uint64_t i = 0; i < hot_lines; ++i) used.push_back(hot / 64 + i);
    for (uint32_t t = 0; t < nthreads; ++t)
      for (uint64_t i = 0; i <= region_lines; ++i) used.push_back(0x1000000 * (t + 1) / 64 + i);
    for (uint64_t ln : used) {
      const auto it = ctx.holders.find(ln);
      ASSERT_EQ(h->sharers(ln), it == ctx.holders.end() ? 0 : it->second) << "line " << ln;
    }
  }
}

}  // namespace
}  // namespace whymiss::sim

namespace whymiss::sim {
namespace {

// Knobs::parallel with threads folded onto cores (one_thread_per_core off, as with exact mode's
// --cores N below the thread count): two threads per core, so the core lock orders them, and a
// core's inbox, a single-consumer ring, must be drained only under it. Counts and the directory
// as in the test above. A plain build rarely shows two drains at once; a -fsanitize=thread build
// reports the race in every run when the drain before the core lock is put back.
TEST(SimParallel, ThreadsFoldedOntoCoresDrainTheirInboxUnderTheCoreLock) {
  const uint32_t nthreads = 4, ncores = 2;
  const int rounds = 200, per_round = 200;
  Knobs k = cores(ncores);
  k.parallel = true;
  auto h = make(small(), k);
  for (uint32_t c = 0; c < ncores; ++c) ASSERT_TRUE(h->add_core(c).ok());
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < nthreads; ++t)
    ts.emplace_back([&, t] {
      AccessResult r;
      uint64_t x = 0x9E3779B97F4A7C15ull * (t + 1);
      for (int i = 0; i < rounds * per_round; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        // A few lines all threads share, written now and then: messages to both cores.
        h->access(t % ncores, 0x80000 + (x % 8) * 64 + (x >> 20) % 8 * 8, 8, (x >> 40) % 4 == 0, r);
      }
    });
  for (auto& th : ts) th.join();
  h->drain_all();
  EXPECT_EQ(h->messages_dropped(), 0u);
  const Counters c = h->counters();
  EXPECT_EQ(c.accesses, uint64_t(nthreads) * rounds * per_round);
  EXPECT_EQ(c.level[1].accesses(), c.level[0].misses());
  EXPECT_GT(c.level[0].coherence_invalidations, 0u);
  struct Ctx {
    std::map<uint64_t, uint64_t> holders;
  } ctx;
  h->for_each_line(
      [](size_t level, uint32_t core, uint64_t ln, void* arg) {
        if (level == 1 && core != Hierarchy::kSharedLevel)
          static_cast<Ctx*>(arg)->holders[ln] |= uint64_t(1) << core;
      },
      &ctx);
  for (uint64_t i = 0; i < 8; ++i)
    EXPECT_EQ(h->sharers(0x80000 / 64 + i), ctx.holders[0x80000 / 64 + i]) << "line " << i;
}

}  // namespace
}  // namespace whymiss::sim
