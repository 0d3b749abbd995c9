// Per-set counts (Hierarchy::set_counts, for the `sets` view).
#include <gtest/gtest.h>

#include <vector>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {

using testing::geo;
using testing::make;

// L1 4 KiB 2-way 64-byte lines = 32 sets; L2 16 KiB 4-way = 64 sets.
CacheGeometry small() { return geo({{"L1", 4096, 2, 64}, {"L2", 16384, 4, 64}}); }

std::vector<SetCount> counts(const Hierarchy& h) {
  std::vector<SetCount> out(h.set_count_capacity());
  out.resize(h.set_counts(out.data(), out.size()));
  return out;
}

// Three lines 32 sets apart (one L1 set, two ways) read in turn: every access misses L1 on set 5
// alone; then many reads of one line hit through the memo and must be credited to its set (9).
TEST(SimSets, MissesAndMemoHitsLandOnTheirSet) {
  Knobs k;
  k.concurrent = false;
  auto h = make(small(), k);
  AccessResult r;
  const uint64_t base = 1 << 20;
  for (int pass = 0; pass < 10; ++pass)
    for (int i = 0; i < 3; ++i) h->access(0, base + (5 + 32 * i) * 64, 8, false, r);
  for (int i = 0; i < 100; ++i) h->access(0, base + 9 * 64 + (i % 8) * 8, 8, false, r);
  const auto c = counts(*h);
  uint64_t l1_set5_misses = 0, l1_set9_hits = 0, l1_other = 0;
  for (const auto& s : c) {
    if (s.level != 0) continue;
    uint64_t misses = 0;
    for (int o = 1; o < kNumOutcomes; ++o) misses += s.by_outcome[o];
    if (s.set == 5) l1_set5_misses = misses;
    else if (s.set == 9) l1_set9_hits = s.by_outcome[int(Outcome::Hit)];
    else l1_other += misses + s.by_outcome[0];
  }
  EXPECT_EQ(l1_set5_misses, 30u);  // 3 lines cycling through 2 ways: no hit
  EXPECT_EQ(l1_set9_hits, 99u);    // the first of the 100 reads missed
  EXPECT_EQ(l1_other, 0u);
}

// Per level, the sets' counts add up to the level's counters, outcome by outcome.
TEST(SimSets, SetsSumToTheLevelCounters) {
  for (bool concurrent : {false, true}) {
    Knobs k;
    k.concurrent = concurrent;
    auto h = make(small(), k);
    AccessResult r;
    uint64_t x = 12345;
    for (int i = 0; i < 20000; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t addr = (x >> 20) % (64 * 1024) + ((i % 4 == 0) ? 0 : (i % 64) * 8);
      h->access(0, addr, 8, (i & 7) == 0, r);
    }
    const Counters total = h->counters();
    uint64_t sum[2][kNumOutcomes] = {};
    for (const auto& s : counts(*h))
      for (int o = 0; o < kNumOutcomes; ++o) sum[s.level][o] += s.by_outcome[o];
    for (int l = 0; l < 2; ++l)
      for (int o = 0; o < kNumOutcomes; ++o)
        EXPECT_EQ(sum[l][o], total.level[l].misses_of(Outcome(o))) << "level " << l << " outcome " << o;
  }
}

TEST(SimSets, OffCountsNothing) {
  Knobs k;
  k.count_sets = false;
  auto h = make(small(), k);
  h->access(0, 4096, 8, false);
  EXPECT_EQ(h->set_count_capacity(), 0u);
  EXPECT_TRUE(counts(*h).empty());
}

}  // namespace
}  // namespace whymiss::sim
