// Properties on random traces: conservation between levels, agreement with a naive reference
// LRU model, zero conflict misses when every level is fully associative.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <vector>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {
using testing::geo;
using testing::make;
using testing::misses;

struct Op {
  uint32_t core;
  uint64_t addr;
  uint32_t size;
  bool write;
};

std::vector<Op> random_trace(uint64_t seed, uint32_t ncores, size_t n, uint64_t span) {
  std::mt19937_64 rng(seed);
  std::vector<Op> ops;
  const uint32_t sizes[] = {1, 2, 4, 8, 16, 32, 64, 100};
  for (size_t i = 0; i < n; ++i) {
    // Skew towards a hot region so hits, reuse and sharing all happen.
    uint64_t a = (rng() % 4 == 0) ? rng() % span : rng() % (span / 16 + 1);
    ops.push_back({uint32_t(rng() % ncores), 0x100000 + a, sizes[rng() % 8], rng() % 3 == 0});
  }
  return ops;
}

void check_conservation(const Counters& c, size_t nlevels) {
  EXPECT_EQ(c.level[0].accesses(), c.line_accesses);
  for (size_t l = 0; l + 1 < nlevels; ++l)
    EXPECT_EQ(c.level[l + 1].accesses(), c.level[l].misses()) << "level " << l;
  for (size_t l = 0; l < nlevels; ++l) {
    uint64_t sum = 0;
    for (int k = 0; k < kNumOutcomes; ++k) sum += c.level[l].misses_of(Outcome(k));
    EXPECT_EQ(sum, c.level[l].accesses());
    EXPECT_LE(c.level[l].misses(), c.level[l].accesses());
  }
  // Only private levels can lose lines to coherence.
  EXPECT_EQ(misses(c, nlevels - 1, Outcome::FalseSharing), 0u);
  EXPECT_EQ(misses(c, nlevels - 1, Outcome::TrueSharing), 0u);
}

TEST(SimProperty, LevelsConserveAccessesOnRandomMultiCoreTraces) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (bool inclusive : {true, false}) {
      Knobs k;
      k.cores = 1 + seed % 4;
      k.inclusive_llc = inclusive;
      k.policy = Policy(seed % 3);
      auto h = make(geo({{"L1", 1024, 4, 64}, {"L2", 4096, 8, 64}, {"L3", 8192, 8, 64}}), k);
      auto ops = random_trace(seed, k.cores, 20000, 64 * 1024);
      for (const Op& o : ops) h->access(o.core, o.addr, o.size, o.write);
      auto c = h->counters();
      EXPECT_EQ(c.accesses, ops.size());
      check_conservation(c, 3);
    }
  }
}

// Naive reference for one core and one level: per-set LRU lists, plus a fully-associative LRU
// list of the same capacity run in lockstep. Returns {misses, misses where FA also missed}.
std::pair<uint64_t, uint64_t> reference(const std::vector<Op>& ops, uint64_t sets, uint32_t ways) {
  std::vector<std::deque<uint64_t>> s(sets);
  std::deque<uint64_t> fa;
  auto touch = [](std::deque<uint64_t>& q, uint64_t ln, size_t cap) {
    auto it = std::find(q.begin(), q.end(), ln);
    bool hit = it != q.end();
    if (hit) q.erase(it); else if (q.size() == cap) q.pop_back();
    q.push_front(ln);
    return hit;
  };
  uint64_t miss = 0, both = 0;
  for (const Op& o : ops) {
    for (uint64_t ln = o.addr / 64; ln <= (o.addr + o.size - 1) / 64; ++ln) {
      bool hit = touch(s[ln % sets], ln, ways);
      bool fa_hit = touch(fa, ln, sets * ways);
      miss += !hit;
      both += !hit && !fa_hit;
    }
  }
  return {miss, both};
}

TEST(SimProperty, SingleLevelLruMatchesNaiveReference) {
  for (uint64_t seed = 10; seed < 14; ++seed) {
    auto ops = random_trace(seed, 1, 20000, 32 * 1024);
    for (auto [sets, ways] : {std::pair<uint64_t, uint32_t>{8, 2}, {16, 4}, {1, 16}, {64, 12}}) {
      auto h = make(geo({{"L1", sets * ways * 64, ways, 64}}));
      for (const Op& o : ops) h->access(0, o.addr, o.size, o.write);
      auto c = h->counters();
      auto [ref_miss, ref_both] = reference(ops, sets, ways);
      EXPECT_EQ(c.level[0].misses(), ref_miss) << sets << "x" << ways << " seed " << seed;
      // Compulsory misses are exactly the distinct lines touched.
      std::set<uint64_t> distinct;
      for (const Op& o : ops)
        for (uint64_t ln = o.addr / 64; ln <= (o.addr + o.size - 1) / 64; ++ln) distinct.insert(ln);
      EXPECT_EQ(misses(c, 0, Outcome::Compulsory), distinct.size());
      // A miss the fully-associative cache also suffers is compulsory or capacity; the rest are
      // conflicts.
      EXPECT_EQ(misses(c, 0, Outcome::Compulsory) + misses(c, 0, Outcome::Capacity), ref_both);
      EXPECT_EQ(misses(c, 0, Outcome::Conflict), ref_miss - ref_both);
    }
  }
}

TEST(SimProperty, FullyAssociativeLruLevelsHaveNoConflictMisses) {
  for (uint64_t seed = 20; seed < 26; ++seed) {
    for (bool inclusive : {true, false}) {
      Knobs k;
      k.cores = 1 + seed % 3;
      k.inclusive_llc = inclusive;
      // Every level a single set: the cache is its own fully-associative shadow.
      auto h = make(geo({{"L1", 1024, 16, 64}, {"L2", 4096, 64, 64}, {"L3", 8192, 128, 64}}), k);
      auto ops = random_trace(seed, k.cores, 30000, 64 * 1024);
      for (const Op& o : ops) h->access(o.core, o.addr, o.size, o.write);
      auto c = h->counters();
      for (size_t l = 0; l < 3; ++l) EXPECT_EQ(misses(c, l, Outcome::Conflict), 0u) << "L" << l + 1;
      EXPECT_GT(misses(c, 0, Outcome::Capacity), 0u);
      check_conservation(c, 3);
    }
  }
}

}  // namespace
}  // namespace whymiss::sim
