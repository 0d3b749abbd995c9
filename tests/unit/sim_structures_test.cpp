// FaLru, LineSet and replacement policies against straightforward reference models.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <set>

#include "sim/fa_lru.h"
#include "sim/line_set.h"
#include "sim/replacement.h"

namespace whymiss::sim {
namespace {

TEST(FaLru, EvictsLeastRecentlyUsed) {
  FaLru f(3);
  EXPECT_FALSE(f.access(1));
  EXPECT_FALSE(f.access(2));
  EXPECT_FALSE(f.access(3));
  EXPECT_TRUE(f.access(1));   // order now 1,3,2 (MRU first)
  EXPECT_FALSE(f.access(4));  // evicts 2
  EXPECT_FALSE(f.contains(2));
  EXPECT_TRUE(f.contains(1));
  EXPECT_TRUE(f.contains(3));
  EXPECT_TRUE(f.contains(4));
  EXPECT_EQ(f.size(), 3u);
}

// A fully-associative LRU of `cap` keys as a list, most recent first: whether `key` hit.
bool reference_access(std::deque<uint64_t>& ref, uint64_t key, uint64_t cap) {
  auto it = std::find(ref.begin(), ref.end(), key);
  const bool hit = it != ref.end();
  if (hit) ref.erase(it);
  ref.push_front(key);
  if (ref.size() > cap) ref.pop_back();
  return hit;
}

TEST(FaLru, MatchesReferenceOnRandomStreams) {
  for (uint64_t cap : {1u, 2u, 7u, 64u, 300u, 5000u}) {
    FaLru f(cap);
    std::deque<uint64_t> ref;  // MRU at front
    std::mt19937_64 rng(cap);
    // Keys collide deliberately in the hash (multiples of large powers of two) to exercise
    // probing and backward-shift deletion.
    for (int i = 0; i < 20000; ++i) {
      uint64_t key = (rng() % (cap * 3 + 2)) << (rng() % 2 ? 20 : 0);
      ASSERT_EQ(f.access(key), reference_access(ref, key, cap)) << "cap " << cap << " step " << i;
    }
    for (uint64_t k : ref) EXPECT_TRUE(f.contains(k));
    EXPECT_EQ(f.size(), ref.size());
  }
}

// Runs of consecutive lines (in a shadow of more than 2,048 lines eight share a home block, so
// clusters grow long and wrap around the table's end; smaller ones hash each line alone) mixed
// with scattered lines: the probe order and deletion shifts must keep every present line
// findable and every absent one absent, grouped or not.
TEST(FaLru, MatchesReferenceOnRunsAndScatter) {
  for (uint64_t cap : {5u, 64u, 1000u, 2100u}) {
    FaLru f(cap);
    std::deque<uint64_t> ref;  // MRU at front
    std::mt19937_64 rng(cap + 1);
    uint64_t next = 0;
    for (int i = 0; i < 60000; ++i) {
      uint64_t key;
      if (rng() % 4) {
        if (rng() % 64 == 0) next = rng() % (cap * 6);
        key = next++;
      } else {
        key = rng() % (cap * 6);
      }
      ASSERT_EQ(f.access(key), reference_access(ref, key, cap)) << "cap " << cap << " step " << i;
      if (i % 5000 == 0) {
        for (uint64_t k = 0; k < cap * 6; ++k)
          ASSERT_EQ(f.contains(k), std::find(ref.begin(), ref.end(), k) != ref.end())
              << "cap " << cap << " step " << i << " key " << k;
      }
    }
    EXPECT_EQ(f.size(), ref.size());
  }
}

// Most accesses reuse one of the last few lines (a compressor's input, table and output, as an
// L1 shadow sees them): reuses at distances 1-6, new lines and far ones, before and after the
// cache fills (the fill turns the stamps into the list) and at small capacities, where the list is
// short. (It checked a variant that kept the four most recent lines off the list, tried and
// dropped: bench/README.md, "Simulator throughput".)
TEST(FaLru, MatchesReferenceWhenAFewLinesAlternate) {
  for (uint64_t cap : {8u, 9u, 10u, 17u, 64u, 300u}) {
    FaLru f(cap);
    std::deque<uint64_t> ref;  // MRU at front
    std::mt19937_64 rng(cap + 7);
    for (int i = 0; i < 60000; ++i) {
      uint64_t key;
      const uint64_t r = rng() % 10;
      if (r < 7 && ref.size() > 6) key = ref[1 + rng() % 6];  // distance 1-6
      else if (r < 9) key = rng() % (cap * 3);                // anything, often absent
      else key = (uint64_t(1) << 40) + uint64_t(i);           // new
      ASSERT_EQ(f.access(key), reference_access(ref, key, cap)) << "cap " << cap << " step " << i;
      if (i % 7000 == 0)
        for (uint64_t k = 0; k < cap * 3; ++k)
          ASSERT_EQ(f.contains(k), std::find(ref.begin(), ref.end(), k) != ref.end())
              << "cap " << cap << " step " << i << " key " << k;
    }
    for (uint64_t k : ref) EXPECT_TRUE(f.contains(k));
    EXPECT_EQ(f.size(), ref.size());
  }
}

// clear() empties a shadow that is full (its recency a list) or still filling (stamps), and it
// then behaves as a new one, through filling up again.
TEST(FaLru, ClearedMatchesReferenceAgain) {
  for (uint64_t cap : {2u, 64u, 5000u}) {
    for (int before : {int(cap / 2), int(cap * 3)}) {
      FaLru f(cap);
      std::mt19937_64 rng(cap + uint64_t(before));
      for (int i = 0; i < before; ++i) f.access(rng() % (cap * 4));
      f.clear();
      EXPECT_EQ(f.size(), 0u);
      std::deque<uint64_t> ref;
      for (int i = 0; i < 20000; ++i) {
        const uint64_t key = rng() % (cap * 3 + 2);
        ASSERT_EQ(f.access(key), reference_access(ref, key, cap)) << "cap " << cap << " step " << i;
      }
      EXPECT_EQ(f.size(), ref.size());
    }
  }
}

TEST(LineSet, ClearForgetsEveryLine) {
  LineSet s;
  for (uint64_t k : {uint64_t(5), uint64_t(5 + 20000), uint64_t(1) << 50}) s.insert(k);
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.contains(5));
  EXPECT_FALSE(s.contains(uint64_t(1) << 50));
  EXPECT_TRUE(s.insert(5 + 20000));
  EXPECT_FALSE(s.insert(5 + 20000));
  EXPECT_EQ(s.size(), 1u);
}

TEST(LineSet, InsertReportsNewness) {
  LineSet s;
  EXPECT_TRUE(s.insert(5));
  EXPECT_FALSE(s.insert(5));
  EXPECT_TRUE(s.insert(5 + 4096));  // another leaf
  EXPECT_TRUE(s.insert(uint64_t(1) << 50));
  EXPECT_TRUE(s.contains(5));
  EXPECT_FALSE(s.contains(6));
  EXPECT_EQ(s.size(), 3u);
  std::set<uint64_t> ref = {5, 5 + 4096, uint64_t(1) << 50};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 50000; ++i) {
    uint64_t k = rng() % 100000;
    ASSERT_EQ(s.insert(k), ref.insert(k).second);
  }
  EXPECT_EQ(s.size(), ref.size());
}

TEST(Replacement, LruVictimIsOldest) {
  auto r = std::move(Replacement::make(Policy::LRU, 2, 4, 0).value());
  for (uint32_t w : {0, 1, 2, 3}) r->touch(1, w);
  EXPECT_EQ(r->victim(1), 0u);
  r->touch(1, 0);
  EXPECT_EQ(r->victim(1), 1u);
  r->touch(1, 1);
  r->touch(1, 2);
  EXPECT_EQ(r->victim(1), 3u);
  EXPECT_EQ(r->victim(0), 0u);  // sets are independent
}

TEST(Replacement, TreePlruFollowsTheTree) {
  auto r = std::move(Replacement::make(Policy::TreePLRU, 1, 4, 0).value());
  // Touch 0,1,2,3: root points left (3 was last, right half), left node points to 0.
  for (uint32_t w : {0, 1, 2, 3}) r->touch(0, w);
  EXPECT_EQ(r->victim(0), 0u);
  r->touch(0, 0);  // root now points right; right node points at 2 (3 was touched after 2)
  EXPECT_EQ(r->victim(0), 2u);
  r->touch(0, 2);  // root left, left node points at 1
  EXPECT_EQ(r->victim(0), 1u);
  // A sequence on which tree-PLRU and true LRU part ways.
  auto lru = std::move(Replacement::make(Policy::LRU, 1, 4, 0).value());
  auto plru = std::move(Replacement::make(Policy::TreePLRU, 1, 4, 0).value());
  for (uint32_t w : {0, 1, 2, 3, 0, 3}) lru->touch(0, w), plru->touch(0, w);
  EXPECT_EQ(lru->victim(0), 1u);   // 1 is the least recently used
  EXPECT_EQ(plru->victim(0), 1u);  // root: 3 last -> left; left node: 0 last -> 1
  for (uint32_t w : {2}) lru->touch(0, w), plru->touch(0, w);
  EXPECT_EQ(lru->victim(0), 1u);
  EXPECT_EQ(plru->victim(0), 1u);
  lru->touch(0, 1), plru->touch(0, 1);  // order now 0,3,2,1: LRU victim 0
  EXPECT_EQ(lru->victim(0), 0u);
  EXPECT_EQ(plru->victim(0), 3u);  // root: 1 last -> right half; right node: 2 after 3 -> 3
}

TEST(Replacement, TreePlruRejectsNonPowerOfTwoWays) {
  auto r = Replacement::make(Policy::TreePLRU, 4, 12, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("power-of-two"), std::string::npos);
}

TEST(Replacement, RandomIsDeterministicAndCoversAllWays) {
  auto a = std::move(Replacement::make(Policy::Random, 4, 8, 42).value());
  auto b = std::move(Replacement::make(Policy::Random, 4, 8, 42).value());
  std::set<uint32_t> seen;
  for (int i = 0; i < 400; ++i) {
    uint32_t v = a->victim(2);
    ASSERT_EQ(v, b->victim(2));
    ASSERT_LT(v, 8u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 8u);
}

}  // namespace
}  // namespace whymiss::sim
