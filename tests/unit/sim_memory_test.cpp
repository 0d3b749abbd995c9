// The simulator's memory: the estimate a budget is checked against, refusals with a sentence
// instead of bad_alloc or the OOM killer, and cores created only when used (issue #19, item 11).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {

using testing::geo;

// Resident bytes of this process (/proc/self/statm, second field).
uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (f) {
    if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

CacheGeometry three_levels() {
  return geo({{"L1", 32 * 1024, 8, 64}, {"L2", 4u << 20, 16, 64}, {"L3", 16u << 20, 16, 64}});
}

TEST(SimMemory, CreateRefusesWhatTheFirstCoreAndSharedLevelCannotFit) {
  const CacheGeometry g = three_levels();
  const uint64_t need =
      Hierarchy::core_bytes(g, Policy::LRU) + Hierarchy::level_bytes(g.levels[2], Policy::LRU);
  Knobs k;
  k.memory_budget = need - 1;
  auto refused = Hierarchy::create(g, k);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().rfind("simulating L1=32K:8:64,L2=4M:16:64,L3=16M:16:64 takes ", 0), 0u)
      << refused.error();
  EXPECT_NE(refused.error().find("of memory is available; use smaller levels"), std::string::npos);
  k.memory_budget = need;
  auto h = Hierarchy::create(g, k);
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h.value()->bytes_in_use(), Hierarchy::level_bytes(g.levels[2], Policy::LRU));
}

TEST(SimMemory, CoresAreCreatedOnFirstUseAndRefusedPastTheBudget) {
  const CacheGeometry g = three_levels();
  const uint64_t core = Hierarchy::core_bytes(g, Policy::LRU);
  const uint64_t shared = Hierarchy::level_bytes(g.levels[2], Policy::LRU);
  Knobs k;
  k.cores = 1024;                            // room for many: nothing is allocated for them yet
  k.memory_budget = shared + 2 * core + core / 2;  // two cores fit, a third does not
  auto h = Hierarchy::create(g, k);
  ASSERT_TRUE(h.ok()) << h.error();
  Hierarchy& s = *h.value();
  EXPECT_EQ(s.bytes_in_use(), shared);
  ASSERT_TRUE(s.add_core(5).ok());
  ASSERT_TRUE(s.add_core(5).ok());  // already there: costs nothing more
  EXPECT_EQ(s.bytes_in_use(), shared + core);
  s.access(7, 0x1000, 8, false);  // access() creates a core nobody added
  EXPECT_EQ(s.bytes_in_use(), shared + 2 * core);
  const Status third = s.add_core(9);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().rfind("a simulated core of L1=32K:8:64,L2=4M:16:64,L3=16M:16:64 takes ", 0), 0u)
      << third.error();
  EXPECT_NE(third.error().find(", and 2 cores already take "), std::string::npos) << third.error();
  EXPECT_NE(third.error().find("use smaller private levels or fewer cores (--cores)"), std::string::npos);
  EXPECT_EQ(s.bytes_in_use(), shared + 2 * core);  // nothing was created
  EXPECT_TRUE(s.add_core(1024 + 5).ok());           // core 5 again (folded modulo the cores)
  EXPECT_EQ(s.access(5, 0x900000, 8, false).lines[0].levels_reached, 4);  // it works
}

// The estimate is what a core really takes once its shadow is full (within a quarter), so a
// budget checked against it bounds the resident memory; before, it takes less (the shadow grows
// with the footprint).
TEST(SimMemory, EstimateMatchesResidentMemoryOnceFull) {
  const CacheGeometry g = geo({{"L1", 64u << 20, 16, 64}});  // one private level: 1 Mi lines
  auto h = Hierarchy::create(g, Knobs{});
  ASSERT_TRUE(h.ok()) << h.error();
  const uint64_t before = resident_bytes();
  ASSERT_TRUE(h.value()->add_core(0).ok());
  const uint64_t estimate = Hierarchy::core_bytes(g, Policy::LRU);
  EXPECT_LT(resident_bytes() - before, estimate);
  for (uint64_t line = 0; line < (uint64_t(64) << 20) / 64; ++line)
    h.value()->access(0, line * 64, 8, false);
  const uint64_t grown = resident_bytes() - before;
  EXPECT_GT(grown, estimate - estimate / 4) << "grew " << grown << ", estimated " << estimate;
  EXPECT_LT(grown, estimate + estimate / 4) << "grew " << grown << ", estimated " << estimate;
}

// Issue #19, item 13: a big level a program barely uses costs its tags and entries, not its
// fully-associative shadow (more than half of the estimate: it used to be allocated in full, and the test fails then).
TEST(SimMemory, ShadowsGrowWithTheFootprint) {
  const CacheGeometry g =
      geo({{"L1", 32 * 1024, 8, 64}, {"L2", 1u << 20, 16, 64}, {"L3", 64u << 20, 16, 64}});
  const uint64_t before = resident_bytes();
  auto h = Hierarchy::create(g, Knobs{});
  ASSERT_TRUE(h.ok()) << h.error();
  for (uint64_t line = 0; line < 4096; ++line) h.value()->access(0, line * 64, 8, true);
  const uint64_t grown = resident_bytes() - before;
  const uint64_t estimate =
      Hierarchy::core_bytes(g, Policy::LRU) + Hierarchy::level_bytes(g.levels[2], Policy::LRU);
  // (Tags, entries and rows are ~45% of the estimate here, the full shadows the rest.)
  EXPECT_LT(grown, estimate * 2 / 3) << "grew " << grown << ", estimated " << estimate;
}

// A level's entries and LRU stamps are zero-filled pages written only where used: with the
// shadows, most of a big level a program barely uses costs nothing (its tags, ~1/8 of the
// estimate, are written up front: an empty way holds ~0). Against vectors it grew ~45%.
TEST(SimMemory, UntouchedPartsOfABigLevelCostNothing) {
  const CacheGeometry g =
      geo({{"L1", 32 * 1024, 8, 64}, {"L2", 1u << 20, 16, 64}, {"L3", 64u << 20, 32, 64}});
  const uint64_t before = resident_bytes();
  auto h = Hierarchy::create(g, Knobs{});  // (32 ways: the L3 keeps LRU stamps, not rank rows)
  ASSERT_TRUE(h.ok()) << h.error();
  for (uint64_t line = 0; line < 4096; ++line) h.value()->access(0, line * 64, 8, true);
  const uint64_t grown = resident_bytes() - before;
  const uint64_t estimate =
      Hierarchy::core_bytes(g, Policy::LRU) + Hierarchy::level_bytes(g.levels[2], Policy::LRU);
  EXPECT_LT(grown, estimate / 4) << "grew " << grown << ", estimated " << estimate;
}

// An allocation that fails anyway (here: an address-space limit, with no budget to warn) is a
// sentence from add_core and from create, never an exception or an abort. In a child process,
// so the limit does not reach the other tests.
TEST(SimMemory, AllocationFailureIsASentence) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit lim{rlim_t(256) << 20, rlim_t(256) << 20};  // below a 1 GiB level's tags and entries
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(10);
    Knobs k;
    k.memory_budget = 0;  // no estimate: the allocation itself must fail gracefully
    auto h = Hierarchy::create(geo({{"L1", 32 * 1024, 8, 64}, {"L2", 1u << 30, 16, 64}}), k);
    if (h.ok()) _exit(11);
    if (h.error().rfind("cannot allocate the ", 0) != 0) _exit(12);
    auto small = Hierarchy::create(geo({{"L1", 1u << 30, 16, 64}}), k);  // private: per core
    if (!small.ok()) _exit(13);
    const Status st = small.value()->add_core(0);
    if (st.ok()) _exit(14);
    if (st.error().rfind("cannot allocate the ", 0) != 0) _exit(15);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace whymiss::sim
