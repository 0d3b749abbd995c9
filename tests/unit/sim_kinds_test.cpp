// Hand-computed traces, one per miss kind, on small geometries where every count can be worked
// out on paper.
#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace whymiss::sim {
namespace {
using testing::geo;
using testing::make;
using testing::misses;

// Zen 5-like L1 (64 sets x 12 ways) with an L2 and L3 large enough to stay out of the way.
CacheGeometry zen_like() {
  return geo({{"L1", 48 * 1024, 12, 64}, {"L2", 1024 * 1024, 16, 64}, {"L3", 32u << 20, 16, 64}});
}

TEST(SimKinds, FirstTouchesAreCompulsoryAtEveryLevel) {
  auto h = make(zen_like());
  for (uint64_t i = 0; i < 100; ++i) h->access(0, 0x10000 + i * 64, 8, i % 2);
  auto c = h->counters();
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(c.level[l].accesses(), 100u);
    EXPECT_EQ(misses(c, l, Outcome::Compulsory), 100u);
    EXPECT_EQ(c.level[l].misses(), 100u);
  }
  EXPECT_EQ(c.level[0].by_outcome[int(Outcome::Compulsory)][1], 50u);  // writes counted as such
}

TEST(SimKinds, ThirteenLinesInOneTwelveWaySetAreConflictMisses) {
  // Lines 4096 bytes apart share L1 set 0 (64 sets x 64 bytes); 13 of them cycled defeat LRU
  // in a 12-way set, while a 768-line fully-associative cache would hold them all.
  auto h = make(zen_like());
  const int rounds = 10;
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i = 0; i < 13; ++i) h->access(0, 0x100000 + i * 4096, 8, false);
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::Compulsory), 13u);
  EXPECT_EQ(misses(c, 0, Outcome::Conflict), 13u * (rounds - 1));
  EXPECT_EQ(misses(c, 0, Outcome::Capacity), 0u);
  EXPECT_EQ(c.level[0].hits(), 0u);
  // In L2 (1024 sets) they fall into 13 different sets: every later access hits there.
  EXPECT_EQ(c.level[1].hits(), 13u * (rounds - 1));
  EXPECT_EQ(c.level[1].misses(), 13u);
}

// Spatial use evidence (#17): the L1 fill that evicts a line reports that line and the bytes its
// holder touched during its tenure; a fill into a free way, a hit, and a line that returns
// after its eviction (a new tenure, a fresh mask) report accordingly.
TEST(SimKinds, AnL1EvictionReportsTheVictimAndTheBytesItsTenureTouched) {
  // L1 is one set of 2 ways (128 bytes): every line maps to it. L2 is roomy.
  auto h = make(geo({{"L1", 128, 2, 64}, {"L2", 64 * 1024, 16, 64}}));
  AccessResult r;
  const uint64_t a = 0x10000, b = a + 64, c = a + 128;
  h->access(0, a + 8, 8, false, r);   // bytes 8..15 of a
  EXPECT_EQ(r.lines[0].l1_victim_mask, 0u);  // a free way: no victim
  h->access(0, a + 40, 4, true, r);   // bytes 40..43 of a (a hit: nothing leaves)
  h->access(0, b, 1, false, r);       // byte 0 of b, the second way
  EXPECT_EQ(r.lines[0].l1_victim_mask, 0u);
  h->access(0, c + 60, 4, false, r);  // c evicts the least recent: a
  EXPECT_EQ(r.lines[0].l1_victim, a / 64);
  EXPECT_EQ(r.lines[0].l1_victim_mask, (uint64_t(0xff) << 8) | (uint64_t(0xf) << 40));
  h->access(0, a + 1, 1, false, r);   // a returns (an L2 hit) and evicts b
  EXPECT_EQ(r.lines[0].level[0], Outcome::Capacity);
  EXPECT_EQ(r.lines[0].l1_victim, b / 64);
  EXPECT_EQ(r.lines[0].l1_victim_mask, uint64_t(1));
  h->access(0, b + 2, 1, false, r);   // b evicts c
  EXPECT_EQ(r.lines[0].l1_victim, c / 64);
  EXPECT_EQ(r.lines[0].l1_victim_mask, uint64_t(0xf) << 60);
  h->access(0, c, 1, false, r);       // c evicts a: only its new tenure's byte 1
  EXPECT_EQ(r.lines[0].l1_victim, a / 64);
  EXPECT_EQ(r.lines[0].l1_victim_mask, uint64_t(2));
}

// #19 item 15: set counts that are not powers of two (a 300 MiB 20-way L3 has 245,760 sets) are
// indexed by line modulo the count: lines 3 sets apart share a set, neighbours do not.
// rivals_within: which lines made a conflict miss. One object whose own 13 lines (4 KiB apart)
// cycle through a 12-way set evicts itself; 13 objects of one line each in the same set evict
// each other, and none of them has a rival of its own.
TEST(SimKinds, ConflictRivalsTellAnObjectsOwnStrideFromOtherObjects) {
  auto h = make(zen_like());
  const uint64_t base = 0x100000, line = 64, ways = 12;
  sim::AccessResult r;
  for (int round = 0; round < 3; ++round)
    for (uint64_t i = 0; i < 13; ++i) h->access(0, base + i * 4096, 8, false, r);
  // The last access (line 12) was a conflict miss; the object is all 13 lines.
  ASSERT_EQ(r.lines[0].level[0], Outcome::Conflict);
  const uint64_t l12 = (base + 12 * 4096) / line;
  const uint64_t lo = base / line, hi = (base + 13 * 4096) / line;
  EXPECT_EQ(h->rivals_within(0, l12, lo, hi, ways), ways);   // its own lines: self-made
  EXPECT_EQ(h->rivals_within(0, l12, lo, hi, 100), 12u);     // all 12 others went through
  // Seen as 13 separate one-line objects, line 12's object has no rival lines of its own.
  EXPECT_EQ(h->rivals_within(0, l12, l12, l12 + 1, ways), 0u);
  // Lines of other sets never count (lo + 1 .. lo + 63 map to sets 1..63).
  EXPECT_EQ(h->rivals_within(0, l12, lo + 1, lo + 64, ways), 0u);
}

// Only lines that went through the set after the missed line's own eviction count: older
// victims were accessed before it and cannot have evicted it.
TEST(SimKinds, ConflictRivalsStopAtTheMissedLinesOwnEviction) {
  auto h = make(zen_like());
  const uint64_t line = 64, set0 = 0x100000, old_obj = 0x400000, b = 0x800000;
  sim::AccessResult r;
  // 13 lines of `old_obj` fill set 0 and evict one of their own, then line A (set 0) and 12 lines
  // of object B push every old line out and A with them; A comes back: a conflict.
  for (uint64_t i = 0; i < 13; ++i) h->access(0, old_obj + i * 4096, 8, false, r);
  h->access(0, set0, 8, false, r);
  for (uint64_t i = 0; i < 12; ++i) h->access(0, b + i * 4096, 8, false, r);
  h->access(0, set0, 8, false, r);
  ASSERT_EQ(r.lines[0].level[0], Outcome::Conflict);
  const uint64_t a = set0 / line;
  EXPECT_EQ(h->rivals_within(0, a, b / line, (b + 12 * 4096) / line, 100), 12u);
  EXPECT_EQ(h->rivals_within(0, a, old_obj / line, (old_obj + 13 * 4096) / line, 100), 0u);
}

TEST(SimKinds, NonPowerOfTwoSetCountsIndexModuloTheCount) {
  const CacheGeometry g = geo({{"L1", 3 * 2 * 64, 2, 64}, {"L2", 6 * 4 * 64, 4, 64}});
  ASSERT_TRUE(validate(g).ok()) << validate(g).error();
  auto h = make(g);
  const int rounds = 10;
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i = 0; i < 3; ++i) h->access(0, i * 3 * 64, 8, false);  // L1 set 0, 3 lines
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::Compulsory), 3u);
  EXPECT_EQ(misses(c, 0, Outcome::Conflict), 3u * (rounds - 1));
  // L2 (6 sets): lines 0, 3, 6 fall in sets 0, 3, 0 and fit.
  EXPECT_EQ(c.level[1].misses(), 3u);
  auto h2 = make(g);
  for (int r = 0; r < rounds; ++r)
    for (uint64_t i = 0; i < 3; ++i) h2->access(0, 0x1000 * 3 + i * 64, 8, false);  // sets 0..2
  EXPECT_EQ(h2->counters().level[0].misses(), 3u);
  EXPECT_EQ(indexing_note(g).rfind("L1 (3 sets), L2 (6 sets): ", 0), 0u) << indexing_note(g);
  EXPECT_EQ(indexing_note(zen_like()), "");
}

TEST(SimKinds, TwelveLinesInOneSetFit) {
  auto h = make(zen_like());
  for (int r = 0; r < 10; ++r)
    for (uint64_t i = 0; i < 12; ++i) h->access(0, 0x100000 + i * 4096, 8, false);
  auto c = h->counters();
  EXPECT_EQ(c.level[0].misses(), 12u);
  EXPECT_EQ(c.level[0].hits(), 12u * 9);
}

TEST(SimKinds, StreamingTwiceTheCapacityIsCapacityMisses) {
  // 1536 lines = 2 x 48K, read sequentially 4 times: LRU set-associative and fully-associative
  // caches both miss on every line after the first round.
  auto h = make(zen_like());
  const uint64_t lines = 2 * 48 * 1024 / 64;
  for (int r = 0; r < 4; ++r)
    for (uint64_t i = 0; i < lines; ++i) h->access(0, 0x200000 + i * 64, 8, false);
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::Compulsory), lines);
  EXPECT_EQ(misses(c, 0, Outcome::Capacity), lines * 3);
  EXPECT_EQ(misses(c, 0, Outcome::Conflict), 0u);
  EXPECT_EQ(c.level[1].hits(), lines * 3);  // 96K fits in the 1M L2
}

TEST(SimKinds, SequentialWordsHitAfterTheFirst) {
  auto h = make(zen_like());
  for (uint64_t a = 0; a < 64 * 100; a += 8) h->access(0, 0x300000 + a, 8, true);
  auto c = h->counters();
  EXPECT_EQ(c.level[0].accesses(), 800u);
  EXPECT_EQ(c.level[0].hits(), 700u);
  EXPECT_EQ(c.level[1].accesses(), 100u);
}

TEST(SimKinds, StraddlingAccessTouchesTwoLines) {
  auto h = make(zen_like());
  auto r = h->access(0, 0x400000 + 60, 8, false);
  EXPECT_EQ(r.nlines, 2u);
  EXPECT_EQ(r.lines[0].line, (0x400000u + 60) / 64);
  EXPECT_EQ(r.lines[1].line, (0x400000u + 60) / 64 + 1);
  auto c = h->counters();
  EXPECT_EQ(c.accesses, 1u);
  EXPECT_EQ(c.line_accesses, 2u);
  EXPECT_EQ(c.level[0].accesses(), 2u);
}

TEST(SimKinds, DirtyEvictionsAreWrittenBack) {
  // L1: 1 set x 2 ways. Write A, write B, read C: A (dirty, LRU) is written back to L2.
  auto h = make(geo({{"L1", 128, 2, 64}, {"L2", 1024, 16, 64}}));
  h->access(0, 0, 8, true);
  h->access(0, 64, 8, true);
  h->access(0, 128, 8, false);
  auto c = h->counters();
  EXPECT_EQ(c.level[0].writebacks, 1u);
  EXPECT_EQ(c.level[1].writebacks, 0u);
}

TEST(SimKinds, ResultReportsLevelsReached) {
  auto h = make(zen_like());
  auto r1 = h->access(0, 0x5000, 8, false);
  EXPECT_EQ(r1.lines[0].levels_reached, 4u);  // from memory
  EXPECT_TRUE(r1.lines[0].from_memory(3));
  EXPECT_EQ(r1.lines[0].level[2], Outcome::Compulsory);
  auto r2 = h->access(0, 0x5008, 8, false);
  EXPECT_EQ(r2.lines[0].levels_reached, 1u);
  EXPECT_EQ(r2.lines[0].level[0], Outcome::Hit);
}

TEST(SimKinds, PlruAndLruDifferOnAKnownSequence) {
  // One 4-way set (L1 = 256 bytes). After 0,1,2,3,0,3,2,1 LRU evicts line 0 but tree-PLRU
  // evicts line 3 (see the replacement test), so re-reading 0 after line 4 hits only with PLRU.
  for (Policy p : {Policy::LRU, Policy::TreePLRU}) {
    Knobs k;
    k.policy = p;
    auto h = make(geo({{"L1", 256, 4, 64}}), k);
    for (uint64_t l : {0, 1, 2, 3, 0, 3, 2, 1, 4}) h->access(0, l * 64, 8, false);
    auto r = h->access(0, 0, 8, false);
    auto c = h->counters();
    if (p == Policy::LRU) {
      EXPECT_EQ(c.level[0].misses(), 6u);
      // One set is fully associative: LRU's misses there are capacity misses by definition.
      EXPECT_EQ(r.lines[0].level[0], Outcome::Capacity);
    } else {
      EXPECT_EQ(c.level[0].misses(), 5u);
      EXPECT_EQ(r.lines[0].level[0], Outcome::Hit);
    }
  }
}

TEST(SimKinds, InclusiveLastLevelBackInvalidatesPrivateCopies) {
  // L1 and L2 are one fully-associative set each; L3 has 2 sets x 2 ways. Lines 0, 2, 4 share
  // L3 set 0, so reading them evicts line 0 from L3 while L1 still holds it.
  CacheGeometry g = geo({{"L1", 256, 4, 64}, {"L2", 512, 8, 64}, {"L3", 256, 2, 64}});
  for (bool inclusive : {true, false}) {
    Knobs k;
    k.inclusive_llc = inclusive;
    auto h = make(g, k);
    for (uint64_t l : {0, 2, 4}) h->access(0, l * 64, 8, false);
    auto r = h->access(0, 0, 8, false);
    auto c = h->counters();
    if (inclusive) {
      // Line 0 was evicted by line 4, then line 2 by the refill of line 0.
      EXPECT_EQ(c.level[0].back_invalidations, 2u);
      EXPECT_EQ(c.level[1].back_invalidations, 2u);
      // When L3 evicted line 0 its shadow (4 lines, fully associative) still held it: that
      // eviction, and so the private misses it caused, are conflicts.
      EXPECT_EQ(r.lines[0].level[0], Outcome::Conflict);
      EXPECT_EQ(r.lines[0].level[1], Outcome::Conflict);
      EXPECT_EQ(r.lines[0].level[2], Outcome::Conflict);
    } else {
      EXPECT_EQ(c.level[0].back_invalidations, 0u);
      EXPECT_EQ(r.lines[0].level[0], Outcome::Hit);
    }
  }
}

TEST(SimKinds, InclusionVictimsOfAnOverfullLastLevelAreCapacity) {
  // L3 holds 4 lines; 6 lines cycle through L1/L2 (8 and 16 lines) — they fit privately but not
  // in L3, so with inclusion every private re-miss is a capacity miss of L3 in disguise.
  CacheGeometry g = geo({{"L1", 512, 8, 64}, {"L2", 1024, 16, 64}, {"L3", 256, 4, 64}});
  auto h = make(g);
  for (int r = 0; r < 5; ++r)
    for (uint64_t l = 0; l < 6; ++l) h->access(0, l * 64, 8, false);
  auto c = h->counters();
  EXPECT_EQ(misses(c, 0, Outcome::Conflict), 0u);
  EXPECT_EQ(misses(c, 0, Outcome::Capacity), 6u * 4);
  EXPECT_EQ(misses(c, 2, Outcome::Capacity), 6u * 4);
}

TEST(SimKinds, CreateRejectsBadKnobs) {
  Knobs k;
  k.cores = 0;
  EXPECT_FALSE(Hierarchy::create(zen_like(), k).ok());
  k.cores = 2;
  k.policy = Policy::TreePLRU;  // 12-way L1
  auto h = Hierarchy::create(zen_like(), k);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.error().find("L1"), std::string::npos);
}

// for_each_line reports exactly the resident lines, per level and core; with a walk bound it
// visits every step-th set only (whose lines, scaled by the step, estimate the level).
TEST(SimWalk, ForEachLineSeesTheResidentLines) {
  // L1 1 KiB 2-way (8 sets), L2 (shared) 8 KiB 4-way (32 sets); 64-byte lines.
  auto h = make(geo({{"L1", 1024, 2, 64}, {"L2", 8192, 4, 64}}), [] {
    Knobs k;
    k.cores = 2;
    return k;
  }());
  ASSERT_TRUE(h);
  for (uint64_t line = 0; line < 64; ++line) h->access(0, line * 64, 8, false);  // 4 KiB on core 0
  h->access(1, 0, 8, false);                                                   // one line on core 1
  struct Count {
    uint64_t n[2][3] = {};  // [level][core 0, core 1, shared]
  } c;
  h->for_each_line(
      [](size_t level, uint32_t core, uint64_t, void* arg) {
        auto* c = static_cast<Count*>(arg);
        c->n[level][core == Hierarchy::kSharedLevel ? 2 : core]++;
      },
      &c);
  EXPECT_EQ(c.n[0][0], 16u);  // L1 is full: the last 16 lines
  EXPECT_EQ(c.n[0][1], 1u);
  EXPECT_EQ(c.n[1][2], 64u);  // all 64 lines fit the shared level
  EXPECT_EQ(Hierarchy::walk_step({"L2", 8192, 4, 64}, 32), 4u);
  EXPECT_EQ(Hierarchy::walk_step({"L2", 8192, 4, 64}, 0), 1u);
  EXPECT_EQ(Hierarchy::walk_step({"L2", 8192, 4, 64}, 1000), 1u);
  uint64_t walked = 0;
  h->for_each_line(
      [](size_t level, uint32_t, uint64_t line, void* arg) {
        if (level == 1) {
          EXPECT_EQ(line % 32 % 4, 0u);  // sets 0, 4, 8, ...
          ++*static_cast<uint64_t*>(arg);
        }
      },
      &walked, 32);
  EXPECT_EQ(walked * 4, 64u);  // 8 of the 32 sets, 2 lines each
}

}  // namespace
}  // namespace whymiss::sim
