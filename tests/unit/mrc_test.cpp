// Miss-ratio curves from reuse histograms: bucket boundaries, and the miss ratio at a size.
#include <gtest/gtest.h>

#include "analysis/mrc.h"

namespace whymiss::analysis {
namespace {

TEST(Mrc, PowersOfTwoAreBucketBoundaries) {
  for (uint64_t d = 0; d < 100000; ++d) {
    const int b = profile::reuse_bucket(d);
    ASSERT_LE(profile::reuse_bucket_low(b), d) << d;
    ASSERT_GT(profile::reuse_bucket_low(b + 1), d) << d;
  }
  for (int e = 4; e < 40; ++e) {
    const uint64_t d = uint64_t(1) << e;
    EXPECT_EQ(profile::reuse_bucket_low(profile::reuse_bucket(d)), d);
  }
}

TEST(Mrc, MissRatioCountsColdAndFartherReuses) {
  profile::ReuseRecord r{};
  r.line_bytes = 64;
  r.cold = 10;
  r.buckets[profile::reuse_bucket(3)] = 20;     // hits from 4 lines up
  r.buckets[profile::reuse_bucket(1024)] = 30;  // hits from 1025 lines up (64 KiB + a line)
  // 100 accesses in all: 40 more were repeats of the previous line (distance 0, not recorded).
  EXPECT_DOUBLE_EQ(miss_ratio_at(r, 100, 64), (10 + 20 + 30) / 100.0);     // 1 line
  EXPECT_DOUBLE_EQ(miss_ratio_at(r, 100, 4 * 64), (10 + 30) / 100.0);      // 4 lines
  EXPECT_DOUBLE_EQ(miss_ratio_at(r, 100, 1024 * 64), (10 + 30) / 100.0);   // 1024 lines: d=1024 misses
  EXPECT_DOUBLE_EQ(miss_ratio_at(r, 100, 2048 * 64), 10 / 100.0);          // only cold
}

TEST(Mrc, ProgramCurveNeedsAHistogram) {
  profile::Profile p;
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}};
  p.meta.accesses = 100;
  EXPECT_FALSE(program_mrc(p).has_value());
  profile::ReuseRecord r{};
  r.line_bytes = 64;
  r.rate = 1;
  r.cold = 5;
  p.reuse.push_back(r);
  auto m = program_mrc(p);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->how, "counted");
  EXPECT_EQ(m->points.front().size, 1024u);
  EXPECT_EQ(m->points.back().size, uint64_t(1) << 30);
  for (const auto& pt : m->points) EXPECT_DOUBLE_EQ(pt.miss_ratio, 0.05);
}

}  // namespace
}  // namespace whymiss::analysis
