// libwhymiss-rt.so in a real instrumented process: what the profile says about heap objects.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/profile.h"

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

uint64_t non_compulsory(const whymiss::profile::ObjectRecord& o) {
  uint64_t n = 0;
  for (int k = 2; k < whymiss::profile::kKinds; ++k) n += o.misses[k];  // past hit, compulsory
  return n;
}

// Object B reuses freed object A's memory. The runtime caches object lookups while the program
// has one thread; a cache entry that outlived free(A) would charge B's misses to A.
TEST(ExactRuntime, AFreedObjectsMissesStayItsOwnWhenItsMemoryIsReused) {
  char dir[] = "/tmp/whymiss-exact-rt-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string prof = std::string(dir) + "/p.data";
  const std::string out = run(std::string(WHYMISS_BIN) + " record --mode exact -o " + prof +
                              " -- " + WHYMISS_OBJECT_REUSE + " 2>/dev/null");
  unsigned long a = 0, b = 0, sum = 0;
  ASSERT_EQ(std::sscanf(out.c_str(), "%lx %lx %lu", &a, &b, &sum), 3) << out;
  ASSERT_EQ(a, b) << "glibc did not reuse the chunk: the test has no teeth here";
  auto p = whymiss::profile::read_profile(prof);
  ASSERT_TRUE(p) << p.error();
  const whymiss::profile::ObjectRecord *ra = nullptr, *rb = nullptr;
  for (const auto& o : p->objects) {
    if (o.start != a || o.size != 64 * 1024) continue;
    if (o.freed && !ra) ra = &o;
    else if (!o.freed || ra) rb = &o;
  }
  ASSERT_NE(ra, nullptr) << "no record of the freed object";
  ASSERT_NE(rb, nullptr) << "no record of the object that reused its memory";
  ASSERT_NE(ra->serial, rb->serial);
  if (ra->serial > rb->serial) std::swap(ra, rb);  // A was allocated first
  // 1024 lines, 4 passes, none fitting in L1 by the end of a pass: A's first pass is compulsory,
  // B's is not (the lines were A's); every later pass misses again.
  EXPECT_GE(non_compulsory(*ra), 3u * 1024 * 9 / 10);
  EXPECT_LE(non_compulsory(*ra), 3u * 1024 + 64);
  EXPECT_GE(non_compulsory(*rb), 4u * 1024 * 9 / 10);
  EXPECT_LE(non_compulsory(*rb), 4u * 1024 + 64);
  std::system((std::string("rm -rf ") + dir).c_str());
}

whymiss::profile::Profile record(const std::string& program, const std::string& args,
                                 const std::string& options = "") {
  char dir[] = "/tmp/whymiss-exact-rt-XXXXXX";
  if (!mkdtemp(dir)) return {};
  const std::string prof = std::string(dir) + "/p.data";
  run(std::string(WHYMISS_BIN) + " record --mode exact " + options + " -o " + prof + " -- " +
      program + " " + args + " >/dev/null 2>&1");
  auto p = whymiss::profile::read_profile(prof);
  std::system((std::string("rm -rf ") + dir).c_str());
  EXPECT_TRUE(p) << p.error();
  return p ? std::move(p.value()) : whymiss::profile::Profile{};
}

uint64_t level_kind(const whymiss::profile::Profile& p, size_t level, int kind) {
  if (level >= p.counters.size()) return ~uint64_t(0);
  return p.counters[level].by_kind[kind][0] + p.counters[level].by_kind[kind][1];
}

// Strict order (--interleave strict): once a program has had a second thread, every access goes
// through the relay thread, which lends the simulator back to a thread running alone and takes it
// back when another thread wakes (relay.h). Neither hand-over may lose, repeat or reorder an
// access: the loop's capacity misses and the access count must be those of the same loop in a
// program that never had a thread. The same holds in parallel mode (the default), where each
// thread simulates its own accesses on its own core throughout.
TEST(ExactRuntime, TheRelayAndItsSoloLoanCountALoopAsASingleThreadedRunDoes) {
  for (const char* mode : {"strict", "parallel"}) {
  SCOPED_TRACE(mode);
  const std::string opt = std::string("--interleave ") + mode;
  const auto alone = record(WHYMISS_SOLO_HANDOFF, "0", opt);
  const auto joined = record(WHYMISS_SOLO_HANDOFF, "1", opt);  // the loan: the loop runs inline
  const auto woken = record(WHYMISS_SOLO_HANDOFF, "2", opt);   // the loan revoked mid-loop
  ASSERT_FALSE(alone.counters.empty());
  ASSERT_FALSE(joined.counters.empty());
  ASSERT_FALSE(woken.counters.empty());
  constexpr int kCapacity = 2, kConflict = 3;
  EXPECT_GT(level_kind(alone, 0, kCapacity), 1000000u);  // 95 passes x 64 Ki lines, all missing
  for (size_t l = 0; l < alone.counters.size(); ++l) {
    for (int k : {kCapacity, kConflict}) {
      EXPECT_EQ(level_kind(joined, l, k), level_kind(alone, l, k)) << "level " << l << " kind " << k;
      EXPECT_EQ(level_kind(woken, l, k), level_kind(alone, l, k)) << "level " << l << " kind " << k;
    }
  }
  EXPECT_GE(joined.meta.accesses, alone.meta.accesses);  // (the idle thread may touch its stack)
  EXPECT_LE(joined.meta.accesses, alone.meta.accesses + 4);
  // The sleeper's 1000 writes, and nothing lost or repeated.
  EXPECT_GE(woken.meta.accesses, alone.meta.accesses + 1000);
  EXPECT_LE(woken.meta.accesses, alone.meta.accesses + 1016);
  }
}

// Threads with lines of their own take their hits on them themselves (held hits, hit_path.h)
// while the relay simulates their misses (strict order), or simulate everything themselves
// (parallel mode, the default). Neither may lose, repeat nor disturb an access: with nothing
// shared, every count is known. Per thread: 3 x 64 x 4096 iterations of a volatile
// increment (a read and a write of its own line) and, every 64th, a read of one line of its
// 4096-line array, cycling: all L1 misses (the array is far above L1, fully associative or not),
// the first pass compulsory; its own line misses once.
TEST(ExactRuntime, HeldHitsAndTheRelayTogetherCountEveryAccessOfPrivateData) {
  for (const char* mode : {"strict", "parallel"}) {
  SCOPED_TRACE(mode);
  const auto p = record(WHYMISS_HELD_HITS, "", std::string("--interleave ") + mode +
                                                   " --cache L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
  ASSERT_FALSE(p.counters.empty());
  constexpr uint64_t kIters = 3 * 64 * 4096, kArrayReads = kIters / 64, kLines = 4096;
  constexpr int kCompulsory = 1, kCapacity = 2, kConflict = 3, kTrue = 4, kFalse = 5;
  // Each thread also reads its array pointer and writes its sum once; main sets up and prints.
  const uint64_t threads = 2 * (2 * kIters + kArrayReads + 2);
  EXPECT_GE(p.meta.accesses, threads);
  EXPECT_LE(p.meta.accesses, threads + 32);
  EXPECT_EQ(p.meta.dropped_accesses, 0u);
  EXPECT_EQ(level_kind(p, 0, kCapacity), 2 * (kArrayReads - kLines));
  EXPECT_EQ(level_kind(p, 0, kConflict), 0u);
  // main writes each slot before its thread starts and reads it after the join: at most two
  // sharing misses per slot, none in the loops.
  EXPECT_LE(level_kind(p, 0, kTrue) + level_kind(p, 0, kFalse), 4u);
  EXPECT_GE(level_kind(p, 0, kCompulsory), 2 * (kLines + 1));
  EXPECT_LE(level_kind(p, 0, kCompulsory), 2 * (kLines + 1) + 16);
  EXPECT_EQ(level_kind(p, 1, kCapacity) + level_kind(p, 1, kConflict), 0u);  // 256 KiB fits L2
  }
}

// The relay takes one access of each thread in turn (strict order), whatever their synchronisation; an acquire
// makes the acquiring thread's next accesses wait for the releasing thread's earlier ones (relay.h,
// "Order between threads"). Without that, a consumer's reads of what a producer wrote and then
// released were often simulated before those writes (hits instead of misses: ~65% of the misses
// below were counted, a different number each run).
// The same through a mutex (interposed: libc's own atomics are not instrumented).
TEST(ExactRuntime, AConsumersReadsComeAfterTheWritesItAcquired) {
  constexpr uint64_t kRounds = 2000, kLines = 64;
  constexpr int kTrue = 4, kFalse = 5;
  for (int run = 0; run < 4; ++run) {
    // Strict order, then parallel mode (the default), where each access is simulated on its
    // thread before it happens: after the acquire, so after the writes.
    const char* how = run % 2 == 0 ? " atomic" : " mutex";
    const auto p = record(WHYMISS_HANDOFF, std::to_string(kRounds) + how,
                          std::string("--interleave ") + (run < 2 ? "strict" : "parallel") +
                              " --cache L1=48K:12:64,L2=1M:16:64,L3=32M:16:64");
    ASSERT_FALSE(p.counters.empty());
    EXPECT_EQ(p.meta.dropped_accesses, 0u);
    // Every round after the first: each data line, plus the flag's line a few times.
    EXPECT_GE(level_kind(p, 0, kTrue), (kRounds - 1) * kLines) << how << " run " << run;
    EXPECT_LE(level_kind(p, 0, kTrue), kRounds * (kLines + 8)) << how << " run " << run;
    EXPECT_EQ(level_kind(p, 0, kFalse), 0u) << how << " run " << run;
  }
}

}  // namespace
