// analysis::analyze_sets on hand-built profiles (the `sets` view's numbers).
#include <gtest/gtest.h>

#include "analysis/sets.h"

namespace whymiss::analysis {
namespace {

profile::Profile base() {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Exact);
  p.geometry.levels = {{"L1", 32768, 8, 64}};  // 64 sets
  return p;
}

// 64 sets with 10 conflict misses each, set 3 with 1,000: set 3 alone is hot (>= 4x the mean,
// 1,630 / 64 = 25.5), its share 1,000 / 1,630; the hottest 8 sets take (1,000 + 70) / 1,630.
TEST(Sets, HotSetAndShares) {
  profile::Profile p = base();
  for (uint32_t s = 0; s < 64; ++s) {
    profile::SetCountRecord r{};
    r.level = 0;
    r.set = s;
    r.by_kind[0] = 100;
    r.by_kind[3] = s == 3 ? 1000 : 10;
    p.set_counts.push_back(r);
  }
  const SetsView v = analyze_sets(p, Analysis{});
  EXPECT_EQ(v.source, "counted");
  ASSERT_EQ(v.levels.size(), 1u);
  const SetLevel& l = v.levels[0];
  EXPECT_EQ(l.misses, 1630u);
  EXPECT_EQ(l.accesses, 6400u + 1630u);
  ASSERT_EQ(l.hot.size(), 1u);
  EXPECT_EQ(l.hot[0].set, 3u);
  EXPECT_DOUBLE_EQ(l.hot[0].share, 1000.0 / 1630.0);
  EXPECT_DOUBLE_EQ(l.hottest_eighth_share, 1070.0 / 1630.0);
  EXPECT_EQ(l.bins.size(), 64u);
  EXPECT_EQ(l.bins[3].misses, 1000u);
  EXPECT_FALSE(l.folded);
}

// Distances: 70 at 0 and 30 in [32, 63] give cf 0.7 (conflict, median 0); 100 in [64, 127]
// give cf 0 (no conflict, median bucket 7). A finding over both instructions sums them.
TEST(Sets, ReConflictDistanceVerdicts) {
  profile::Profile p = base();
  profile::RcdRecord a{}, b{};
  a.ip = 0x10;
  a.l1_sets = 64;
  a.first = 5;
  a.buckets[0] = 70;
  a.buckets[6] = 30;
  b.ip = 0x20;
  b.l1_sets = 64;
  b.buckets[7] = 100;
  p.rcd = {a, b};
  Analysis an;
  Finding f;
  f.kind = Kind::Conflict;
  f.instructions = {{0x10, 1}, {0x20, 1}};
  an.findings.push_back(f);
  const SetsView v = analyze_sets(p, an);
  ASSERT_EQ(v.instructions.size(), 2u);
  const RcdInstr& x = v.instructions[0].ip == 0x10 ? v.instructions[0] : v.instructions[1];
  const RcdInstr& y = v.instructions[0].ip == 0x10 ? v.instructions[1] : v.instructions[0];
  EXPECT_DOUBLE_EQ(x.rcd.cf(), 0.7);
  EXPECT_TRUE(x.rcd.conflict());
  EXPECT_EQ(x.rcd.median_bucket(), 0);
  EXPECT_EQ(x.rcd.first, 5u);
  EXPECT_EQ(y.rcd.cf(), 0);
  EXPECT_FALSE(y.rcd.conflict());
  EXPECT_EQ(y.rcd.median_bucket(), 7);
  EXPECT_EQ(profile::rcd_bucket_low(7), 64u);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_DOUBLE_EQ(v.findings[0].rcd.cf(), 70.0 / 200.0);
  EXPECT_TRUE(v.findings[0].rcd.conflict());  // 35 % >= the 30 % cut
}

TEST(Sets, BucketsMatchTheShortThreshold) {
  EXPECT_EQ(profile::rcd_bucket(0), 0);
  EXPECT_EQ(profile::rcd_bucket(7), kRcdShortBuckets - 1);
  EXPECT_EQ(profile::rcd_bucket(8), kRcdShortBuckets);
  EXPECT_EQ(profile::rcd_bucket(~uint64_t(0)), profile::kRcdBuckets - 1);
}

TEST(Sets, SoftProfilesSayEstimated) {
  profile::Profile p = base();
  p.meta.mode = uint32_t(profile::Mode::Soft);
  EXPECT_EQ(analyze_sets(p, Analysis{}).source, "estimated");
  EXPECT_TRUE(analyze_sets(p, Analysis{}).levels.empty());
}

}  // namespace
}  // namespace whymiss::analysis
