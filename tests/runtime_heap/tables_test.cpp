// IpTable (runtime/common/tables.h): the per-thread instruction table of the exact runtime, and
// the direct-mapped cache in front of it that the runtime's hit path reads.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/common/tables.h"

namespace whymiss::rt {
namespace {

bool inside(const IpTable& t, const profile::InstructionRecord* r) {
  return r >= t.records() && r < t.records() + t.size();
}

// Growing the table moves every record: nothing find() or find_hot() returns afterwards may point
// into the old array, and counts kept through either must land in the one record of their ip.
TEST(IpTable, CachedLookupsFollowTheRecordsWhenTheTableGrows) {
  IpTable t;
  constexpr uint64_t kIps = 5000;  // several doublings from the first 64 records
  for (uint64_t i = 0; i < kIps; ++i) {
    const uint64_t ip = 0x400000 + i * 7;
    profile::InstructionRecord* r = t.get(ip);
    ASSERT_NE(r, nullptr);
    r->accesses[0]++;
    // The previous few ips were cached before this insert may have moved the array.
    for (uint64_t back = 0; back < 4 && back <= i; ++back) {
      const uint64_t old = 0x400000 + (i - back) * 7;
      profile::InstructionRecord* f = t.find(old);
      ASSERT_NE(f, nullptr) << i;
      ASSERT_TRUE(inside(t, f)) << "stale record for ip " << old << " after " << i << " inserts";
      EXPECT_EQ(f->ip, old);
      if (profile::InstructionRecord* h = t.find_hot(old)) EXPECT_EQ(h, f);
      f->accesses[1]++;
    }
  }
  ASSERT_EQ(t.size(), kIps);
  for (uint64_t i = 0; i < kIps; ++i) {
    const profile::InstructionRecord* r = t.find(0x400000 + i * 7);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->accesses[0], 1u);
    EXPECT_EQ(r->accesses[1], i + 4 < kIps ? 4u : kIps - i) << i;
  }
  t.release();
  EXPECT_EQ(t.find(0x400000), nullptr);
  EXPECT_EQ(t.find_hot(0x400000), nullptr);
}

// find() never creates; find_hot() answers only from the cache, and two ips sharing a cache slot
// evict each other without confusing their records.
TEST(IpTable, FindDoesNotInsertAndCacheSlotsDoNotMixIps) {
  IpTable t;
  EXPECT_EQ(t.find(42), nullptr);
  EXPECT_EQ(t.size(), 0u);
  // 0x1000 and 0x2000 share a cache slot ((ip ^ ip >> 6) % 64 == 0 for both).
  profile::InstructionRecord* a = t.get(0x1000);
  profile::InstructionRecord* b = t.get(0x2000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(t.find(0x1000), a);
    EXPECT_EQ(t.find(0x2000), b);
  }
  EXPECT_EQ(t.find_hot(0x2000), b);
  EXPECT_EQ(t.size(), 2u);
  t.release();
}

}  // namespace
}  // namespace whymiss::rt
