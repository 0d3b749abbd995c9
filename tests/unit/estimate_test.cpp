// The estimator on synthetic sampled profiles of the workload programs: estimate → analyze must
// give the verdict exact mode gives (kind and origin of the top finding), and nothing for the
// fixed twins and the control.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "model/profile.h"
#include "expect_findings.h"
#include "sampled_workloads.h"

namespace whymiss::analysis {
namespace {

using testing::SamplerConfig;
using testing::Workload;

Analysis run(profile::Profile& p) {
  Status st = estimate(p);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
  return analyze(p);
}

Analysis estimated(const Workload& w, SamplerConfig c = {}) {
  profile::Profile p = testing::sampled_profile(w, c);
  return run(p);
}

using testing::expect_none;
using testing::expect_top;

TEST(Estimate, ColumnWalkIsAnApplicationConflict) {
  Analysis a = estimated(testing::conflict_app(false));
  expect_top(a, Kind::Conflict, Origin::Application);
  EXPECT_EQ(a.findings[0].level, 0);
}

TEST(Estimate, PaddedColumnWalkHasNoConflict) {
  // Exact mode keeps ~1/8 capacity misses here (the padded matrix still exceeds L1 between
  // passes over a line); what must go is the conflict.
  Analysis a = estimated(testing::conflict_app(true));
  for (const Finding& f : a.findings) EXPECT_NE(f.kind, Kind::Conflict);
}

TEST(Estimate, LockstepHeapObjectsAreAnAllocatorConflict) {
  Analysis a = estimated(testing::conflict_alloc(false));
  expect_top(a, Kind::Conflict, Origin::Allocator);
  EXPECT_GE(a.findings[0].objects.size(), 2u);
}

TEST(Estimate, LockstepHeapObjectsFromSamplesAloneAreAnAllocatorConflict) {
  // No capture stage (debug registers that never fire): Algorithm 1 on the sampled lines alone.
  // The sampled lines fill only the objects' sets, about half of L1's, well above the even
  // spread, where a sweep fills them all about evenly.
  SamplerConfig c;
  c.window_every = 0;
  Analysis a = estimated(testing::conflict_alloc(false), c);
  expect_top(a, Kind::Conflict, Origin::Allocator);
  expect_none(estimated(testing::conflict_alloc(true), c));
}

TEST(Estimate, StaggeredHeapObjectsHaveNoFinding) { expect_none(estimated(testing::conflict_alloc(true))); }

TEST(Estimate, RepeatedSweepOf8MiBIsCapacityBeyondL1) {
  Analysis a = estimated(testing::capacity(false));
  expect_top(a, Kind::Capacity, Origin::Application);
  EXPECT_GE(a.findings[0].level, 1);  // L2 (1 MiB) is too small as well; L3 (32 MiB) is not
  EXPECT_LT(a.findings[0].level, 2);
}

TEST(Estimate, TiledSweepHasNoFinding) { expect_none(estimated(testing::capacity(true))); }

// capacity.c as the soft runtime really samples it: one task-clock sample per period, and the
// period (1 ms) longer than one pass over the 8 MiB array (~0.4 ms), so successive samples land
// at unrelated points of the sweep and step forward or back about equally often. `passes` per
// element as in the program run at a large scale (the tiled twin makes all of a block's passes
// before the next block). No capture stage.
Workload sparse_capacity(bool tiled, uint64_t passes) {
  Workload w;
  const uint64_t n = (8 << 20) / 8, block = 4096, base = 0x7f1000000010;
  w.objects.push_back(testing::heap_object(5, base, 8 << 20, 0));
  w.accesses = n * passes * 2;
  w.gen = [=](uint32_t, uint64_t i) {
    uint64_t j = i / 2, e = tiled ? (j / (block * passes)) * block + j % block : j % n;
    return testing::Access{i % 2 ? 0x401304u : 0x401300u, base + e * 8, 8,
                           uint8_t(i % 2 ? profile::kAccessWrite : profile::kAccessRead)};
  };
  return w;
}

TEST(Estimate, SweepSampledLessOftenThanOncePerPassIsStillCapacity) {
  // Periods between 1.3 and 4 passes: for some, the samples of one instruction happen to step
  // back more often than forward, which must not hide the sweep.
  for (uint64_t period : {2'700'011ull, 3'100'007ull, 4'300'003ull, 5'900'009ull, 8'100'001ull}) {
    SamplerConfig c;
    c.period = period;
    c.window_every = 0;
    Analysis a = estimated(sparse_capacity(false, 6400), c);
    SCOPED_TRACE(period);
    expect_top(a, Kind::Capacity, Origin::Application);
    expect_none(estimated(sparse_capacity(true, 6400), c));
  }
}

TEST(Estimate, SampledLinesNearTheLevelsSizeAreNoConflict) {
  // The sweep's ~730 sampled lines per instruction almost fill L1 (768 lines): spread uniformly,
  // about half the sets hold more sampled lines than ways by chance alone. That is no set
  // concentration: what a sweep of 8 MiB has is capacity misses.
  for (uint64_t period : {8'900'017ull, 9'200'009ull, 9'500'003ull}) {
    SamplerConfig c;
    c.period = period;
    c.window_every = 0;
    Analysis a = estimated(sparse_capacity(false, 6400), c);
    SCOPED_TRACE(period);
    for (const Finding& f : a.findings) EXPECT_NE(f.kind, Kind::Conflict);
    expect_top(a, Kind::Capacity, Origin::Application);
  }
}


TEST(Estimate, AdjacentCountersAreApplicationFalseSharing) {
  Analysis a = estimated(testing::sharing_global(false, false));
  expect_top(a, Kind::FalseSharing, Origin::Application);
  ASSERT_EQ(a.findings[0].line_threads.size(), 2u);
  EXPECT_EQ(a.findings[0].line_threads[0].write_mask & a.findings[0].line_threads[1].write_mask, 0u);
}

TEST(Estimate, WindowsThatCaughtTheThreadsAtDifferentTimesLeaveSharingToTheSamples) {
  // On a busy machine (or when traps serialise the threads), a window may capture one thread
  // first and the other only after it: the captures never overlap, so their replay shows no
  // interleaving, which is no evidence that the threads do not contend. The samples decide.
  for (bool same_word : {false, true}) {
    SamplerConfig c;
    c.backend = profile::CaptureBackend::HwBreakpoint;  // Int3 windows never decide sharing
    profile::Profile p = testing::sampled_profile(testing::sharing_global(false, same_word), c);
    ASSERT_FALSE(p.captures.empty());
    std::map<uint32_t, uint64_t> last_of_first_thread;  // window -> last capture time of thread 1
    for (const auto& c : p.captures)
      if (c.thread == 1) last_of_first_thread[c.window] = std::max(last_of_first_thread[c.window], c.time_ns);
    for (auto& c : p.captures) {
      if (c.thread != 2) continue;
      const uint64_t first = p.windows[c.window].start_ns;
      c.time_ns += last_of_first_thread[c.window] + 1 - first;  // after thread 1's, same order
      p.windows[c.window].end_ns = std::max(p.windows[c.window].end_ns, c.time_ns);
    }
    SCOPED_TRACE(same_word);
    Analysis a = run(p);
    expect_top(a, same_word ? Kind::TrueSharing : Kind::FalseSharing, Origin::Application);
  }
}

TEST(Estimate, Int3WindowsLeaveSharingToTheSamples) {
  // Int3 captures of two threads overlap in time but come in bursts: both threads trap on the
  // one patched instruction and step over it in turn, so the replay would see the bursts, not
  // the program's interleaving. Debug-register captures of the same shape are taken at face
  // value (the threads did take turns).
  for (auto backend : {profile::CaptureBackend::Int3, profile::CaptureBackend::HwBreakpoint}) {
    SamplerConfig c;
    c.backend = backend;
    profile::Profile p = testing::sampled_profile(testing::sharing_global(false, false), c);
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> seen, total;  // (window, thread) -> count
    for (const auto& cr : p.captures) total[{cr.window, cr.thread}]++;
    for (auto& cr : p.captures) {
      // Thread 1 runs, thread 2 runs, thread 1's last capture comes after: two switches.
      const uint64_t start = p.windows[cr.window].start_ns;
      const uint32_t i = seen[{cr.window, cr.thread}]++;
      const bool last = i + 1 == total[{cr.window, cr.thread}];
      cr.time_ns = start + (cr.thread == 2 ? 20000 + i : (last ? 40000 : i));
      p.windows[cr.window].end_ns = std::max(p.windows[cr.window].end_ns, cr.time_ns);
    }
    SCOPED_TRACE(int(backend));
    Analysis a = run(p);
    if (backend == profile::CaptureBackend::Int3) expect_top(a, Kind::FalseSharing, Origin::Application);
    else for (const Finding& f : a.findings) EXPECT_NE(f.kind, Kind::FalseSharing);
  }
}

TEST(Estimate, FalseSharingFromSamplesAloneWithoutCaptures) {
  SamplerConfig c;
  c.window_every = 0;
  Analysis a = estimated(testing::sharing_global(false, false), c);
  expect_top(a, Kind::FalseSharing, Origin::Application);
}

TEST(Estimate, PaddedCountersHaveNoFinding) { expect_none(estimated(testing::sharing_global(true, false))); }

TEST(Estimate, ObjectsOfTwoThreadsOnOneLineAreAllocatorFalseSharing) {
  Analysis a = estimated(testing::false_sharing_alloc(false));
  expect_top(a, Kind::FalseSharing, Origin::Allocator);
  EXPECT_EQ(a.findings[0].objects.size(), 2u);
}

TEST(Estimate, AlignedPerThreadObjectsHaveNoFinding) { expect_none(estimated(testing::false_sharing_alloc(true))); }

TEST(Estimate, SameWordIsTrueSharing) {
  Analysis a = estimated(testing::sharing_global(false, true));
  expect_top(a, Kind::TrueSharing, Origin::Application);
}

TEST(Estimate, ThreadLocalSumsHaveNoFinding) { expect_none(estimated(testing::sharing_global(true, true))); }

TEST(Estimate, ControlHasNoFinding) { expect_none(estimated(testing::control())); }

// ---- pmu: misses come from each sample's data source ----

SamplerConfig pmu() {
  SamplerConfig c;
  c.mode = profile::Mode::Pmu;
  return c;
}

TEST(EstimatePmu, ColumnWalkIsAnApplicationConflict) {
  Analysis a = estimated(testing::conflict_app(false), pmu());
  expect_top(a, Kind::Conflict, Origin::Application);
}

TEST(EstimatePmu, LockstepHeapObjectsAreAnAllocatorConflict) {
  Analysis a = estimated(testing::conflict_alloc(false), pmu());
  expect_top(a, Kind::Conflict, Origin::Allocator);
}

TEST(EstimatePmu, LockstepConflictFromSampledSetsAlone) {
  SamplerConfig c = pmu();
  c.window_every = 0;
  Analysis a = estimated(testing::conflict_alloc(false), c);
  expect_top(a, Kind::Conflict, Origin::Allocator);
}

TEST(EstimatePmu, FalseAndTrueSharing) {
  expect_top(estimated(testing::false_sharing_alloc(false), pmu()), Kind::FalseSharing, Origin::Allocator);
  expect_top(estimated(testing::sharing_global(false, true), pmu()), Kind::TrueSharing, Origin::Application);
  expect_none(estimated(testing::sharing_global(true, false), pmu()));
}

// ---- units and consistency ----

TEST(Estimate, CountsAreInSamplesAndLevelsNest) {
  profile::Profile p = testing::sampled_profile(testing::capacity(false), {});
  ASSERT_TRUE(estimate(p).ok());
  uint64_t l1 = 0;
  for (int k = 0; k < profile::kKinds; ++k) l1 += p.counters[0].by_kind[k][0] + p.counters[0].by_kind[k][1];
  EXPECT_EQ(l1, p.samples.size());
  for (size_t l = 1; l < p.counters.size(); ++l) {
    uint64_t acc = 0, prev_miss = 0;
    for (int k = 0; k < profile::kKinds; ++k) acc += p.counters[l].by_kind[k][0] + p.counters[l].by_kind[k][1];
    for (int k = 1; k < profile::kKinds; ++k) prev_miss += p.counters[l - 1].by_kind[k][0] + p.counters[l - 1].by_kind[k][1];
    EXPECT_EQ(acc, prev_miss) << "level " << l;
  }
  // The heap array's miss fields were filled from its instructions.
  ASSERT_EQ(p.objects.size(), 1u);
  EXPECT_GT(p.objects[0].misses[2], 0u);
  EXPECT_EQ(p.objects[0].thread_mask, 1u);
}

TEST(Estimate, ExactProfilesAreLeftAlone) {
  profile::Profile p = testing::sampled_profile(testing::control(), {});
  p.meta.mode = uint32_t(profile::Mode::Exact);
  ASSERT_TRUE(estimate(p).ok());
  EXPECT_TRUE(p.instructions.empty());
  EXPECT_TRUE(p.lines.empty());
  for (const auto& c : p.counters) EXPECT_EQ(c.by_kind[0][0], 0u);
}

TEST(Estimate, InconsistentCapturesAreAnError) {
  profile::Profile p = testing::sampled_profile(testing::control(), {});
  ASSERT_GE(p.captures.size(), 2u);
  std::swap(p.captures[0].time_ns, p.captures[1].time_ns);
  p.captures[0].time_ns += 1;
  Status st = estimate(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("out of time order"), std::string::npos) << st.error();
  p = testing::sampled_profile(testing::control(), {});
  p.captures.back().window = uint32_t(p.windows.size());
  EXPECT_FALSE(estimate(p).ok());
}

TEST(Estimate, SupportAndProvenanceNameTheirSources) {
  profile::Profile p = testing::sampled_profile(testing::conflict_alloc(false), {});
  Analysis a = run(p);
  ASSERT_FALSE(a.findings.empty());
  Support s = support(p, a.findings[0]);
  EXPECT_GT(s.samples, 0u);
  EXPECT_GT(s.windows, 0u);
  EXPECT_GT(s.captures, s.windows);
  EXPECT_NE(provenance(p, a.findings[0]).find("window"), std::string::npos);
}

// The soft golden inputs (tests/golden/soft_*.data) are what this generator writes: small runs
// so the files stay small. WHYMISS_WRITE_SOFT_GOLDEN=1 rewrites them after an intended change.
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Estimate, GoldenInputsAreWhatTheGeneratorWrites) {
  SamplerConfig c;
  c.window_every = 32;
  c.window_captures = 64;
  Workload fs = testing::false_sharing_alloc(false);
  fs.accesses = 200000;
  Workload ca = testing::conflict_alloc(false);
  ca.accesses = 100 * 256 * 16;
  std::vector<std::pair<std::string, profile::Profile>> inputs;
  inputs.push_back({"soft_false_sharing_alloc", testing::sampled_profile(fs, c)});
  profile::Profile& p = inputs.back().second;
  p.meta.discarded[uint32_t(profile::DiscardReason::Clobbered)] = 3;
  p.notes.push_back({1, "hardware breakpoints do not fire on this machine: windows captured with int3"});
  inputs.push_back({"soft_conflict_alloc", testing::sampled_profile(ca, c)});
  const std::string dir = std::string(WHYMISS_SOURCE_DIR) + "/tests/golden/";
  const std::string tmp = std::string(WHYMISS_BINARY_DIR) + "/estimate_test_golden.data";
  for (auto& [name, prof] : inputs) {
    const std::string golden = dir + name + ".data";
    if (std::getenv("WHYMISS_WRITE_SOFT_GOLDEN")) {
      ASSERT_TRUE(profile::write_profile(golden, prof).ok());
      continue;
    }
    ASSERT_TRUE(profile::write_profile(tmp, prof).ok());
    EXPECT_TRUE(slurp(tmp) == slurp(golden)) << name << ".data differs from what the generator writes; "
                                         << "rerun with WHYMISS_WRITE_SOFT_GOLDEN=1 and regenerate its reports";
  }
  std::remove(tmp.c_str());
}

}  // namespace
}  // namespace whymiss::analysis
