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

TEST(Mrc, EachLineSizeSaysHowItWasObtained) {
  // Three program histograms (64, 128 and 32 bytes at 64-byte lines) and the tracker's account of
  // each (Section::ReuseInfo): every line followed at 64; sampled at 128; at 32 every line but
  // some accesses dropped. A profile of an older build has no account: its curves say only what
  // the histogram's rate says.
  profile::Profile p;
  p.geometry.levels = {{"L1", 32 * 1024, 8, 64}};
  p.meta.accesses = 100;
  for (uint32_t line : {64u, 128u, 32u}) {
    profile::ReuseRecord r{};
    r.line_bytes = line;
    r.rate = line == 128 ? 0.0625 : 1;
    r.cold = 5;
    p.reuse.push_back(r);
  }
  EXPECT_EQ(other_mrc_lines(p), (std::vector<uint32_t>{128, 32}));
  EXPECT_EQ(program_mrc(p, 32)->how, "counted");  // no account yet: nothing known dropped
  EXPECT_EQ(program_mrc(p, 32)->dropped, 0u);
  p.reuse_info = {{64, profile::kReuseEveryLine, 1, 0, 10},
                  {128, profile::kReuseSampledAsked, 0.0625, 0, 1},
                  {32, profile::kReuseEveryLine, 1, 7, 20}};
  EXPECT_EQ(program_mrc(p)->how, "counted");
  EXPECT_EQ(program_mrc(p, 128)->how, "sampled (6.25 % of lines followed)");
  EXPECT_DOUBLE_EQ(program_mrc(p, 128)->rate, 0.0625);
  const auto half = program_mrc(p, 32);
  EXPECT_EQ(half->how, "partial (7 accesses not followed, counted as hits)");
  EXPECT_EQ(half->dropped, 7u);
  p.reuse_info[1].dropped = 3;  // both
  EXPECT_EQ(program_mrc(p, 128)->how,
            "sampled (6.25 % of lines followed); partial (3 accesses not followed, counted as hits)");
  // Without the half-line histogram (WHYMISS_MRC_HALF=0) only twice the line is listed.
  p.reuse.pop_back();
  EXPECT_EQ(other_mrc_lines(p), (std::vector<uint32_t>{128}));
  EXPECT_FALSE(program_mrc(p, 32).has_value());
}

}  // namespace
}  // namespace whymiss::analysis
