// `whymiss check`'s limits: parsing, and evaluation against an analysis.
#include <gtest/gtest.h>

#include "analysis/gate.h"

namespace whymiss::analysis {
namespace {

profile::Profile two_levels(uint64_t l1_misses, uint64_t l2_misses) {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Exact);
  p.geometry.levels = {{"L1", 48 * 1024, 12, 64}, {"L2", 1 << 20, 16, 64}};
  p.counters.resize(2);
  p.counters[0].by_kind[3][0] = l1_misses;
  p.counters[1].by_kind[2][0] = l2_misses;
  return p;
}

Finding finding(Kind k, int level, double share, uint64_t misses) {
  Finding f;
  f.kind = k;
  f.level = level;
  f.share = share;
  f.misses = misses;
  return f;
}

TEST(Gate, ParsesSharesAsPercentagesOrFractions) {
  auto a = parse_share_limit("conflict@L1=5%");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Kind::Conflict);
  EXPECT_EQ(*a->level, "L1");
  EXPECT_DOUBLE_EQ(a->max_share, 0.05);
  auto b = parse_share_limit("any=0.2");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->any_kind);
  EXPECT_FALSE(b->level.has_value());
  EXPECT_DOUBLE_EQ(b->max_share, 0.2);
  for (const char* bad : {"conflict", "conflicts=5%", "conflict@=5%", "capacity=150%", "capacity=1.5",
                          "capacity=-1", "capacity=", "capacity=5%%", "capacity=nan"})
    EXPECT_FALSE(parse_share_limit(bad).ok()) << bad;
  auto m = parse_misses_limit("L2=50000");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->level, "L2");
  EXPECT_EQ(m->max_misses, 50000u);
  for (const char* bad : {"", "L2=", "=5", "12k", "-3", "99999999999999999999"})
    EXPECT_FALSE(parse_misses_limit(bad).ok()) << bad;
}

TEST(Gate, AViolatedLimitGivesOneSentenceAndAHeldOneNothing) {
  profile::Profile p = two_levels(1000, 400);
  Analysis a;
  a.findings = {finding(Kind::Conflict, 0, 0.30, 300), finding(Kind::Conflict, 0, 0.20, 200),
                finding(Kind::Capacity, 1, 0.90, 360)};
  auto lim = [](const char* s) { return *parse_share_limit(s); };
  auto r = check_limits(p, a, {lim("conflict@L1=40%"), lim("conflict@L1=60%"), lim("capacity=50%"),
                               lim("false_sharing=0%"), lim("capacity@l1=10%")});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  // The two L1 conflicts add up to 50 %.
  EXPECT_NE((*r)[0].find("conflict problems at L1 account for 50.0% of L1 misses (500 misses, counted)"), std::string::npos) << (*r)[0];
  EXPECT_NE((*r)[0].find("--max conflict@L1=40%"), std::string::npos);
  // Without a level, the worst level decides.
  EXPECT_NE((*r)[1].find("capacity problems at L2 account for 90.0%"), std::string::npos) << (*r)[1];
  auto m = check_limits(p, a, {*parse_misses_limit("999"), *parse_misses_limit("L2=400")});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), 1u);
  EXPECT_NE((*m)[0].find("L1 misses are 1,000 (counted), above the limit of 999"), std::string::npos) << (*m)[0];
  EXPECT_FALSE(check_limits(p, a, {lim("conflict@L3=5%")}).ok());  // no such level
}

}  // namespace
}  // namespace whymiss::analysis
