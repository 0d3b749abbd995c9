// Plans: serialisation for the runtime, per-thread periods, and the attrs they open.
#include <gtest/gtest.h>

#include <set>

#include "runtime/pmu/plan.h"

namespace whymiss::pmu {
namespace {

Plan ibs_plan() {
  Plan p;
  p.backend = Backend::AmdIbs;
  p.event_count = 1;
  p.events[0].type = 11;
  p.events[0].config = 1ull << 19;
  p.events[0].role = Role::Ops;
  p.sample_type = kIbsSampleType;
  p.period = 0x40000;
  p.exclude_kernel = false;
  p.family = 0x1A;
  p.model = 0x02;
  return p;
}

Plan pebs_plan() {
  Plan p;
  p.backend = Backend::IntelPebs;
  p.event_count = 3;
  p.events[0] = {4, 0x8203, 0, 0, 0, Role::Leader};
  p.events[1] = {4, 0x1cd, 30, 0, 2, Role::Loads};
  p.events[2] = {4, 0x82d0, 0, 0, 2, Role::Stores};
  p.sample_type = kPebsSampleType;
  p.period = 10007;
  return p;
}

TEST(PmuPlan, RoundTripsThroughItsString) {
  for (const Plan& p : {ibs_plan(), pebs_plan()}) {
    std::string s = plan_to_string(p);
    auto back = parse_plan(s);
    ASSERT_TRUE(back.ok()) << back.error() << " in " << s;
    EXPECT_EQ(back->backend, p.backend);
    EXPECT_EQ(back->event_count, p.event_count);
    for (uint32_t i = 0; i < p.event_count; ++i) {
      EXPECT_EQ(back->events[i].type, p.events[i].type);
      EXPECT_EQ(back->events[i].config, p.events[i].config);
      EXPECT_EQ(back->events[i].config1, p.events[i].config1);
      EXPECT_EQ(back->events[i].precise_ip, p.events[i].precise_ip);
      EXPECT_EQ(back->events[i].role, p.events[i].role);
    }
    EXPECT_EQ(back->exclude_kernel, p.exclude_kernel);
    EXPECT_EQ(back->family, p.family);
    EXPECT_EQ(plan_to_string(*back), s);
  }
}

TEST(PmuPlan, RejectsMalformedAndInconsistentPlans) {
  std::string good = plan_to_string(ibs_plan());
  for (std::string bad : {std::string(""), std::string("whymiss-pmu-plan/2 backend=2"),
                          good + " bogus=1", good + " period=x", good + " ev=1,2,3",
                          good + " ev=1,2,3,4,5,6,7", good + " ev=4,1,0,0,9,0",
                          good.substr(0, good.find(" ev="))}) {
    EXPECT_FALSE(parse_plan(bad).ok()) << bad;
  }
  Plan p = pebs_plan();
  std::swap(p.events[0], p.events[1]);  // leader not first
  EXPECT_FALSE(validate(p).ok());
  p = pebs_plan();
  p.sample_type = kIbsSampleType;
  EXPECT_FALSE(validate(p).ok());
  p = ibs_plan();
  p.events[0].role = Role::Loads;
  EXPECT_FALSE(validate(p).ok());
  p.events[0].role = Role::Ops;
  p.ring_pages = 48;
  EXPECT_FALSE(validate(p).ok());
}

TEST(PmuPlan, ThreadPeriodsAreRandomisedAroundTheMean) {
  Plan p = pebs_plan();
  std::set<uint64_t> seen;
  for (uint32_t tid = 1000; tid < 1100; ++tid) {
    uint64_t v = thread_period(p, tid, 1);
    EXPECT_GE(v, p.period - p.period / 8 - 1);
    EXPECT_LE(v, p.period + p.period / 8 + 1);
    seen.insert(v);
    EXPECT_EQ(v, thread_period(p, tid, 1));  // deterministic per (tid, seed)
  }
  EXPECT_GT(seen.size(), 50u);
  Plan q = ibs_plan();
  for (uint32_t tid = 1; tid < 100; ++tid) {
    uint64_t v = thread_period(q, tid, 7);
    EXPECT_EQ(v % 16, 0u);
    EXPECT_GE(v, kIbsMinPeriod);
    EXPECT_LE(v, kIbsMaxPeriod);
  }
  q.period = 1;
  EXPECT_EQ(thread_period(q, 5, 0), kIbsMinPeriod);
  q.period = 1ull << 40;
  EXPECT_EQ(thread_period(q, 5, 0), kIbsMaxPeriod);
}

TEST(PmuPlan, AttrsCarryTheFormatAndFilters) {
  Plan p = pebs_plan();
  perf_event_attr a;
  fill_attr(p, 1, 9999, &a);
  EXPECT_EQ(a.type, 4u);
  EXPECT_EQ(a.config, 0x1cdu);
  EXPECT_EQ(a.config1, 30u);
  EXPECT_EQ(a.sample_period, 9999u);
  EXPECT_EQ(a.sample_type, kPebsSampleType);
  EXPECT_EQ(a.precise_ip, 2u);
  EXPECT_EQ(a.exclude_kernel, 1u);
  EXPECT_EQ(a.use_clockid, 1u);
  EXPECT_EQ(a.clockid, CLOCK_MONOTONIC);
  EXPECT_EQ(a.sample_id_all, 1u);
  EXPECT_EQ(a.watermark, 1u);
  EXPECT_GT(a.wakeup_watermark, 0u);
  fill_attr(p, 0, 9999, &a);  // leader: counts only
  EXPECT_EQ(a.sample_period, 0u);
  EXPECT_EQ(a.sample_type, 0u);
  fill_attr(ibs_plan(), 0, 0x40000, &a);
  EXPECT_EQ(a.exclude_kernel, 0u);
  EXPECT_EQ(a.exclude_hv, 0u);
  EXPECT_EQ(a.sample_type, kIbsSampleType);
}

}  // namespace
}  // namespace whymiss::pmu
