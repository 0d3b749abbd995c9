// analysis::data_flow and analysis::working_set on hand-built profiles: grouping by type when
// the oracle knows it (else by site), the dominant path, sampled replay, and the unavailable
// cases.
#include <gtest/gtest.h>

#include "analysis/flow.h"
#include "analysis/working_set.h"

namespace whymiss::analysis {
namespace {

using profile::kFlowAlloc;
using profile::kFlowRead;
using profile::kFlowWrite;

profile::Profile exact_profile(int sites) {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Exact);
  p.geometry.levels = {{"L1", 32768, 8, 64}, {"L2", 262144, 8, 64}};
  p.sites.resize(sites);
  return p;
}

profile::FlowRecord flow(uint32_t site, uint32_t from, uint8_t fk, uint32_t to, uint8_t tk, uint64_t n,
                         uint64_t misses, uint64_t serial) {
  profile::FlowRecord r{};
  r.site = site;
  r.from = from;
  r.from_kind = fk;
  r.to = to;
  r.to_kind = tk;
  r.handovers = n;
  r.misses = misses;
  r.example_serial = serial;
  r.example_size = 64;
  return r;
}

// Knows the type of objects whose serial is odd.
class OddTypes : public TypeOracle {
 public:
  DataType msg{"struct msg", 64, {}};
  const DataType* heap_type(const profile::Profile&, const profile::ObjectRecord& o) override {
    return o.serial % 2 ? &msg : nullptr;
  }
  const DataType* global_type(uint64_t, uint64_t*) override { return nullptr; }
};

TEST(DataFlow, GroupsBySiteAndFollowsTheDominantPath) {
  profile::Profile p = exact_profile(2);
  p.flow_info.push_back({});
  p.flow_info[0].objects = 10;
  // Site 0: alloc T0 -> write T1 (10) -> read T2 (8) / read T3 (2); T2 read -> T1 write (7).
  p.flows = {flow(0, 0, kFlowAlloc, 1, kFlowWrite, 10, 10, 2), flow(0, 1, kFlowWrite, 2, kFlowRead, 8, 16, 2),
             flow(0, 1, kFlowWrite, 3, kFlowRead, 2, 2, 2), flow(0, 2, kFlowRead, 1, kFlowWrite, 7, 7, 2),
             // Site 1: one thread only.
             flow(1, 0, kFlowAlloc, 0, kFlowWrite, 3, 3, 4)};
  NoTypes none;
  Flow f = data_flow(p, none);
  ASSERT_TRUE(f.available);
  EXPECT_FALSE(f.sampled);
  ASSERT_EQ(f.groups.size(), 2u);
  const FlowGroup& g = f.groups[0];  // most charged first
  EXPECT_EQ(g.site, 0u);
  EXPECT_EQ(g.type, "");
  EXPECT_EQ(g.handovers, 27u);
  EXPECT_EQ(g.charged, 35u);
  EXPECT_EQ(g.cross_thread, 27u);
  EXPECT_EQ(g.steps[0].from_kind, kFlowAlloc);  // allocation first
  // alloc T0 -> write T1 -> read T2 -> write T1 (the step back is used once: then no new step)
  ASSERT_EQ(g.path.size(), 3u);
  EXPECT_EQ(g.steps[g.path[1]].to, 2u);
  EXPECT_EQ(g.steps[g.path[2]].to, 1u);
  EXPECT_EQ(g.steps[g.path[2]].to_kind, kFlowWrite);
  EXPECT_EQ(f.groups[1].cross_thread, 0u);  // T0 allocates and writes: no move between threads
}

TEST(DataFlow, KnownTypesMergeSites) {
  profile::Profile p = exact_profile(3);
  p.flow_info.push_back({});
  p.flows = {flow(0, 0, kFlowAlloc, 1, kFlowWrite, 4, 4, 1), flow(1, 0, kFlowAlloc, 1, kFlowWrite, 6, 6, 3),
             flow(2, 0, kFlowAlloc, 1, kFlowWrite, 5, 5, 2)};
  OddTypes odd;
  Flow f = data_flow(p, odd);
  ASSERT_EQ(f.groups.size(), 2u);
  EXPECT_EQ(f.groups[0].type, "struct msg");
  EXPECT_EQ(f.groups[0].sites.size(), 2u);
  ASSERT_EQ(f.groups[0].steps.size(), 1u);  // the same step of both sites, added up
  EXPECT_EQ(f.groups[0].steps[0].handovers, 10u);
  EXPECT_EQ(f.groups[1].type, "");
  EXPECT_EQ(f.groups[1].site, 2u);
}

TEST(DataFlow, ExactWithoutRecordsIsUnavailable) {
  profile::Profile p = exact_profile(0);
  NoTypes none;
  Flow f = data_flow(p, none);
  EXPECT_FALSE(f.available);
  EXPECT_NE(f.unavailable.find("WHYMISS_FLOW=0"), std::string::npos);
}

TEST(DataFlow, SampledReplaysSamplesInTimeOrder) {
  profile::Profile p = exact_profile(1);
  p.meta.mode = uint32_t(profile::Mode::Soft);
  profile::ObjectRecord o{};
  o.serial = 7;
  o.alloc_thread = 0;
  o.site = 0;
  p.objects.push_back(o);
  auto sample = [](uint64_t t, uint32_t thread, uint8_t flags) {
    profile::SampleRecord s{};
    s.time_ns = t;
    s.thread = thread;
    s.flags = flags;
    s.object = 7;
    return s;
  };
  // Out of order in the file: T1 writes at 1 and 2, T2 reads at 3, T1 writes at 4.
  p.samples = {sample(3, 2, profile::kAccessRead), sample(1, 1, profile::kAccessWrite),
               sample(4, 1, profile::kAccessWrite), sample(2, 1, profile::kAccessWrite)};
  NoTypes none;
  Flow f = data_flow(p, none);
  ASSERT_TRUE(f.available);
  EXPECT_TRUE(f.sampled);
  EXPECT_EQ(f.objects, 1u);
  ASSERT_EQ(f.groups.size(), 1u);
  const auto& s = f.groups[0].steps;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].from_kind, kFlowAlloc);
  EXPECT_EQ(s[0].to, 1u);
  EXPECT_EQ(s[0].charged, 2u);  // both of T1's first samples
  EXPECT_EQ(f.handovers, 3u);   // alloc->T1, T1->T2, T2->T1
}

TEST(WorkingSet, SumsPerGroupSampleAndLevel) {
  profile::Profile p = exact_profile(2);
  profile::WorkingSetInfoRecord info{};
  info.period = 4096;
  info.samples = 2;
  p.working_set_info.push_back(info);
  auto rec = [](uint32_t sample, uint32_t level, uint32_t site, uint64_t lines, uint64_t serial) {
    profile::WorkingSetRecord r{};
    r.sample = sample;
    r.level = level;
    r.site = site;
    r.lines = lines;
    r.example_serial = serial;
    r.time_ns = sample * 1000;
    return r;
  };
  p.working_set = {rec(0, 0, 0, 100, 2), rec(0, 1, 0, 300, 2), rec(1, 0, 0, 512, 2), rec(1, 1, 0, 4000, 2),
                   rec(0, 0, 1, 7, 4), rec(1, 1, 1, 9, 4), rec(1, 0, profile::kWsNotHeap, 3, 0)};
  NoTypes none;
  WorkingSet w = working_set(p, none);
  ASSERT_TRUE(w.available);
  EXPECT_EQ(w.capacity_lines[0], 512u);
  EXPECT_EQ(w.capacity_lines[1], 4096u);
  ASSERT_EQ(w.samples.size(), 2u);
  EXPECT_EQ(w.samples[1].time_ns, 1000u);
  ASSERT_EQ(w.groups.size(), 3u);
  EXPECT_EQ(w.groups[0].site, 0u);  // most lines at the last level first
  EXPECT_EQ(w.groups[0].lines[1][1], 4000u);
  EXPECT_EQ(w.groups[0].peak[0], 512u);
  EXPECT_EQ(w.groups[1].site, 1u);
  EXPECT_EQ(w.groups[1].lines[0][1], 0u);  // no record: nothing resident
  EXPECT_FALSE(w.groups[2].heap);
}

TEST(WorkingSet, UnavailableInSamplingModesAndWhenOff) {
  profile::Profile p = exact_profile(0);
  NoTypes none;
  EXPECT_NE(working_set(p, none).unavailable.find("WHYMISS_WORKING_SET=0"), std::string::npos);
  p.working_set_info.push_back({});  // recorded, but no sample could be taken
  EXPECT_NE(working_set(p, none).unavailable.find("without the relay"), std::string::npos);
  p.working_set_info.clear();
  p.meta.mode = uint32_t(profile::Mode::Soft);
  WorkingSet w = working_set(p, none);
  EXPECT_FALSE(w.available);
  EXPECT_NE(w.unavailable.find("exact mode"), std::string::npos);
}

}  // namespace
}  // namespace whymiss::analysis
