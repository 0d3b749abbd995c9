// The estimator's trace path (estimate.h, "Trace windows") on synthetic soft profiles of the
// workload programs whose windows hold every access: estimate → analyze must give exact mode's
// verdict, with counts in traced accesses.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "analysis/types.h"
#include "analysis/working_set.h"
#include "analysis/sets.h"
#include "model/profile.h"
#include "expect_findings.h"
#include "sampled_workloads.h"

namespace whymiss::analysis {
namespace {

using testing::TraceConfig;
using testing::Workload;

Analysis traced(const Workload& w, TraceConfig c = {}, profile::Profile* out = nullptr) {
  profile::Profile p = testing::traced_profile(w, c);
  EXPECT_TRUE(uses_traces(p));
  Status st = estimate(p);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
  Analysis a = analyze(p);
  if (out) *out = p;
  return a;
}

using testing::expect_none;
using testing::expect_top;

uint64_t l1_kind(const profile::Profile& p, int kind) { return p.counters[0].by_kind[kind][0] + p.counters[0].by_kind[kind][1]; }

TEST(EstimateTrace, ColumnWalkIsAnApplicationConflictAtL1) {
  Analysis a = traced(testing::conflict_app(false));
  expect_top(a, Kind::Conflict, Origin::Application);
  EXPECT_EQ(a.findings[0].level, 0);
}

TEST(EstimateTrace, PaddedColumnWalkHasNoConflict) {
  Analysis a = traced(testing::conflict_app(true));
  for (const Finding& f : a.findings) EXPECT_NE(f.kind, Kind::Conflict);
}

TEST(EstimateTrace, LockstepHeapObjectsAreAnAllocatorConflict) {
  Analysis a = traced(testing::conflict_alloc(false));
  expect_top(a, Kind::Conflict, Origin::Allocator);
  expect_none(traced(testing::conflict_alloc(true)));
}

TEST(EstimateTrace, LinesAWindowTouchesFirstAreNotCompulsory) {
  // The second pass decides them: nothing is compulsory, and the counts are traced accesses.
  profile::Profile p;
  traced(testing::conflict_app(false), {}, &p);
  EXPECT_EQ(l1_kind(p, 1), 0u);
  uint64_t seen = 0;
  for (int k = 0; k < profile::kKinds; ++k) seen += p.counters[0].by_kind[k][0] + p.counters[0].by_kind[k][1];
  EXPECT_EQ(seen, p.trace_accesses.size());
}

// The `sets` view's numbers from the replay: the column walk's L1 misses concentrate on few
// sets with short re-conflict distances (CCProf: conflict); its padded twin's do not. The set
// counts add up to the estimated L1 counters.
TEST(EstimateTrace, SetCountsAndReConflictDistancesFromTheReplay) {
  for (bool padded : {false, true}) {
    profile::Profile p;
    Analysis a = traced(testing::conflict_app(padded), {}, &p);
    uint64_t l1_sum = 0, l1_total = 0;
    for (const auto& sc : p.set_counts)
      if (sc.level == 0)
        for (uint64_t n : sc.by_kind) l1_sum += n;
    for (int k = 0; k < profile::kKinds; ++k) l1_total += p.counters[0].by_kind[k][0] + p.counters[0].by_kind[k][1];
    EXPECT_EQ(l1_sum, l1_total) << "padded " << padded;
    const SetsView v = analyze_sets(p, a);
    EXPECT_EQ(v.source, "estimated");
    for (const auto& r : p.rcd) EXPECT_EQ(r.source, profile::kRcdEstimated);
    if (padded) {  // the padded walk's window may miss nowhere after its first pass
      for (const auto& ri : v.instructions) EXPECT_FALSE(ri.rcd.conflict()) << "cf " << ri.rcd.cf();
      continue;
    }
    ASSERT_FALSE(v.instructions.empty());
    EXPECT_TRUE(v.instructions[0].rcd.conflict()) << "cf " << v.instructions[0].rcd.cf();
    ASSERT_FALSE(v.levels.empty());
    EXPECT_FALSE(v.levels[0].hot.empty());
  }
}

TEST(EstimateTrace, SweepLongerThanAWindowIsCapacityFromTheSamplesSpan) {
  // A window covers ~24 KiB of the 8 MiB sweep: its wrap-around alone would hit in L1. The
  // samples' sweep span (8 MiB) says the lines it touched first come back only after 8 MiB.
  Analysis a = traced(testing::capacity(false));
  expect_top(a, Kind::Capacity, Origin::Application);
  EXPECT_EQ(a.findings[0].level, 1);
  expect_none(traced(testing::capacity(true)));
}

TEST(EstimateTrace, ThreadsTracedTogetherShowFalseSharing) {
  Analysis a = traced(testing::sharing_global(false, false));
  expect_top(a, Kind::FalseSharing, Origin::Application);
  expect_none(traced(testing::sharing_global(true, false)));
}

TEST(EstimateTrace, SameWordIsTrueSharing) {
  expect_top(traced(testing::sharing_global(false, true)), Kind::TrueSharing, Origin::Application);
}

TEST(EstimateTrace, HeapObjectsOfTwoThreadsInOneLineAreAllocatorFalseSharing) {
  Analysis a = traced(testing::false_sharing_alloc(false));
  expect_top(a, Kind::FalseSharing, Origin::Allocator);
  expect_none(traced(testing::false_sharing_alloc(true)));
}

// The shared bytes name the data, not whatever else lies on the line: a global counter at byte 32
// of a line that starts with another variable (stderr in a small program's .bss), and heap objects
// of two threads beside a third object nobody touched.
TEST(EstimateTrace, SharingNamesTheObjectsTheThreadsTouchedNotTheirNeighbours) {
  testing::Workload w = testing::sharing_global(false, true);
  w.gen = [](uint32_t, uint64_t) {
    return testing::Access{0x401500, 0x405060, 8, uint8_t(profile::kAccessRead | profile::kAccessWrite)};
  };
  Analysis a = traced(w);
  expect_top(a, Kind::TrueSharing, Origin::Application);
  ASSERT_EQ(a.findings[0].objects.size(), 1u);
  EXPECT_EQ(a.findings[0].objects[0].sample_addr, 0x405060u);

  testing::Workload h = testing::false_sharing_alloc(false);
  h.objects.push_back(testing::heap_object(103, 0x555500000ec0, 16, 3));  // same line, untouched
  Analysis b = traced(h);
  expect_top(b, Kind::FalseSharing, Origin::Allocator);
  std::vector<uint64_t> serials;
  for (const ObjectRef& o : b.findings[0].objects) serials.push_back(o.serial);
  std::sort(serials.begin(), serials.end());
  EXPECT_EQ(serials, (std::vector<uint64_t>{101, 102}));
}

// A line record keeps the byte masks of its first 8 threads: an object only a ninth or tenth
// thread wrote must still be named (ten threads: eight on one heap object, two on another), and
// an object on the line nobody touched still not.
TEST(EstimateTrace, SharingNamesObjectsOfThreadsBeyondTheRecordsMasks) {
  testing::Workload w = testing::false_sharing_alloc(false);
  w.threads = 10;
  w.accesses = 200000;
  const uint64_t a = 0x555500000ec0, b = 0x555500000ee0;
  w.objects = {testing::heap_object(101, a, 16, 1), testing::heap_object(102, b, 16, 9),
               testing::heap_object(103, 0x555500000ef0, 16, 3)};  // same line, untouched
  w.gen = [=](uint32_t t, uint64_t i) {
    return testing::Access{i % 2 ? 0x401603u : 0x401600u, t <= 8 ? a : b, 8,
                           uint8_t(i % 2 ? profile::kAccessWrite : profile::kAccessRead)};
  };
  profile::Profile p;
  Analysis an = traced(w, {}, &p);
  ASSERT_FALSE(an.findings.empty());
  bool named_b = false, named_untouched = false;
  for (const Finding& f : an.findings)
    for (const ObjectRef& o : f.objects) {
      named_b |= o.serial == 102;
      named_untouched |= o.serial == 103;
    }
  EXPECT_TRUE(named_b) << "the object threads 9 and 10 wrote is in no finding";
  EXPECT_FALSE(named_untouched);
}

// Two threads update one word in bursts of 500 accesses, taking turns: each sleeps in the
// kernel (a futex wait on a mutex) while the other runs, and its first access after waking is
// marked as following a system call. Replayed with each thread paused as long as its calls
// blocked, the line moves once per turn (about 24 times an epoch) and nothing is worth
// reporting. The same times without the marks are a busy machine's time slices, not the
// program's synchronisation: the threads then replay as if they ran at once, access by access,
// and the word bounces on nearly every access (true sharing), as it does without any times.
TEST(EstimateTrace, AThreadBlockedInASystemCallWaitsInTheReplay) {
  const testing::Workload w = testing::sharing_global(false, true);
  auto bursts = [&](bool marked) {
    profile::Profile p = testing::traced_profile(w, TraceConfig{});
    std::map<uint32_t, uint64_t> seen;  // window -> accesses so far
    constexpr uint64_t kBurst = 500;
    for (profile::TraceAccessRecord& a : p.trace_accesses) {
      const profile::TraceRecord& t = p.traces[a.window];
      const uint64_t k = seen[a.window]++, turn = t.thread - 1;
      p.trace_times.push_back(p.traces[a.window - turn].start_ns + (2 * (k / kBurst) + turn) * kBurst + k % kBurst);
      if (marked && k && k % kBurst == 0) a.marks = profile::kTraceAfterSyscall;
    }
    return p;
  };
  auto run = [](profile::Profile p, TraceSummary* s) {
    Status st = estimate(p);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
    *s = trace_summary(p);
    return std::make_pair(l1_kind(p, 4) + l1_kind(p, 5), analyze(p));
  };
  TraceSummary s;
  auto [blocked, a] = run(bursts(true), &s);
  EXPECT_EQ(s.together_groups, 3u);
  EXPECT_EQ(s.timed_groups, 3u);
  EXPECT_LE(blocked, 3u * 2 * 24);
  expect_none(a);

  auto [sliced, b] = run(bursts(false), &s);
  EXPECT_EQ(s.timed_groups, 0u);  // nobody made a system call: nobody paused
  EXPECT_GE(sliced, 10000u);
  expect_top(b, Kind::TrueSharing, Origin::Application);

  profile::Profile p = bursts(true);
  p.trace_times.clear();  // an older profile: no times
  auto [untimed, c] = run(p, &s);
  EXPECT_EQ(s.timed_groups, 0u);
  EXPECT_GE(untimed, 10000u);
  expect_top(c, Kind::TrueSharing, Origin::Application);
}

// Mutex hand-overs (estimate.h): coherence misses between critical sections of one mutex are
// weighted by the native / traced hand-over shares the runtime counted, a thinned miss counting
// as a hit; misses outside critical sections, from another mutex's, or without the counts count
// whole.
TEST(EstimateTrace, LockHandOversAreWeightedByTheNativeShare) {
  const testing::Workload w = testing::sharing_global(false, true);  // two threads, one word
  enum Marks { kNone, kBoth, kThreadOne, kOtherMutex };
  // Each window starts with a write in a lock call (glibc taking the mutex: its lock word's line
  // names the mutex), then holds it; kOtherMutex: thread 2's lock word is on another line.
  auto profile_with = [&](bool locks, uint64_t native_handovers, Marks marks) {
    profile::Profile p = testing::traced_profile(w, TraceConfig{});
    if (locks) {
      profile::LockInfoRecord r{};
      r.native_acquisitions = 100000;
      r.native_handovers = native_handovers;
      r.traced_acquisitions = 2000;
      r.traced_handovers = 1000;
      p.locks.push_back(r);
    }
    std::map<uint32_t, bool> started;
    for (profile::TraceAccessRecord& a : p.trace_accesses) {
      const uint32_t thread = p.traces[a.window].thread;
      if (marks == kNone || (marks == kThreadOne && thread != 1)) continue;
      if (!started[a.window]) {
        started[a.window] = true;
        a.marks |= profile::kTraceInLockCall;
        a.flags = profile::kAccessWrite;
        if (marks == kOtherMutex && thread == 2) a.addr += 64 * 1024;
      } else {
        a.marks |= profile::kTraceLockHeld;
      }
    }
    return p;
  };
  struct Counts { uint64_t coherence, hits; };
  auto counts = [](profile::Profile p, Analysis* a = nullptr) {
    Status st = estimate(p);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
    if (a) *a = analyze(p);
    return Counts{l1_kind(p, 4) + l1_kind(p, 5), l1_kind(p, 0)};
  };
  // Native share ~0.001 against ~0.5 traced: one miss in ~500 counts, the rest are hits, and no
  // finding.
  const Counts whole = counts(profile_with(false, 0, kBoth));
  ASSERT_GE(whole.coherence, 10000u);
  Analysis a;
  const Counts weighted = counts(profile_with(true, 100, kBoth), &a);
  const double wt = (101.0 / 100002) / (1001.0 / 2002);
  EXPECT_NEAR(double(weighted.coherence), double(whole.coherence) * wt, 4);
  EXPECT_EQ(weighted.hits - whole.hits, whole.coherence - weighted.coherence);
  expect_none(a);
  const TraceSummary s = trace_summary(profile_with(true, 100, kBoth));
  EXPECT_DOUBLE_EQ(s.native_handover_share, 101.0 / 100002);
  EXPECT_DOUBLE_EQ(s.traced_handover_share, 1001.0 / 2002);
  EXPECT_DOUBLE_EQ(s.lock_weight, wt);
  EXPECT_EQ(s.native_acquisitions, 100000u);

  // Only thread 1 in critical sections (thread 2's writes are unlocked), or each thread under a
  // mutex of its own: nothing is weighted.
  EXPECT_EQ(counts(profile_with(true, 100, kThreadOne)).coherence,
            counts(profile_with(false, 100, kThreadOne)).coherence);
  const Counts other = counts(profile_with(false, 100, kOtherMutex));
  ASSERT_GE(other.coherence, 10000u);
  EXPECT_EQ(counts(profile_with(true, 100, kOtherMutex)).coherence, other.coherence);
  // Natively as many hand-overs as traced (or more): weight 1.
  EXPECT_EQ(counts(profile_with(true, 50000, kBoth)).coherence, whole.coherence);
  EXPECT_EQ(counts(profile_with(true, 90000, kBoth)).coherence, whole.coherence);
  // Too few acquisitions on a side, or no traced hand-over: no weight.
  profile::Profile few = profile_with(true, 100, kBoth);
  few.locks[0].traced_acquisitions = kMinLockAcquisitions - 1;
  few.locks[0].traced_handovers = 1;
  EXPECT_EQ(counts(few).coherence, whole.coherence);
  EXPECT_LT(trace_summary(few).lock_weight, 0);
  profile::Profile none = profile_with(true, 100, kBoth);
  none.locks[0].traced_handovers = 0;
  EXPECT_EQ(counts(none).coherence, whole.coherence);
}

TEST(EstimateTrace, ThreadsTracedInSeparateEpochsAreReplayedInPairs) {
  // A busy machine runs one thread per epoch: each epoch that traced one thread is replayed with
  // the next one that traced the other, so the sharing pattern is still found (and the summary
  // says the epochs were paired); the fixed twin, traced the same way, still has none.
  TraceConfig c;
  c.separate = true;
  profile::Profile p;
  Analysis a = traced(testing::sharing_global(false, false), c, &p);
  expect_top(a, Kind::FalseSharing, Origin::Application);
  EXPECT_GT(l1_kind(p, 5), 0u);
  EXPECT_EQ(trace_summary(p).paired_epochs, p.traces.size());
  expect_none(traced(testing::sharing_global(true, false), c));
  expect_top(traced(testing::sharing_global(false, true), c), Kind::TrueSharing, Origin::Application);
}

TEST(EstimateTrace, OneThreadEpochsOfTheSameThreadAreNotPaired) {
  // A single-threaded program's epochs stay apart: nothing to interleave.
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  for (uint32_t e = 1; e <= 3; ++e) {
    profile::TraceRecord r{};
    r.thread = 0, r.epoch = e, r.start_ns = e * 1000, r.end_ns = e * 1000 + 100;
    p.traces.push_back(r);
  }
  EXPECT_EQ(trace_summary(p).paired_epochs, 0u);
  EXPECT_LT(trace_summary(p).overlap, 0);
}

TEST(EstimateTrace, WorkingSetIsWhatEachEpochsReplayLeftInTheCaches) {
  // The capacity sweep's windows each read and write 3,000 (or 3,001) consecutive 8-byte
  // elements starting 16 bytes into a line: 375 to 377 lines of the array, at every level (the
  // window's footprint fits L1). Earlier epochs' lines, still in L2 and L3 under their own
  // tags, are not counted again. A level walked at every k-th set is scaled (within 5 %).
  profile::Profile p;
  traced(testing::capacity(false), {}, &p);
  NoTypes none;
  const WorkingSet w = working_set(p, none);
  ASSERT_TRUE(w.available) << w.unavailable;
  EXPECT_TRUE(w.replayed);
  EXPECT_TRUE(w.estimated);
  EXPECT_EQ(w.samples.size(), 3u);  // one per epoch
  const WsGroup* heap = nullptr;
  for (const WsGroup& g : w.groups)
    if (g.heap) heap = &g;
  ASSERT_NE(heap, nullptr);
  for (const auto& s : heap->lines)
    for (size_t l = 0; l < p.geometry.levels.size(); ++l) {
      if (w.set_step[l] == 1) {
        EXPECT_GE(s[l], 375u) << "level " << l;
        EXPECT_LE(s[l], 377u) << "level " << l;
      } else {
        EXPECT_NEAR(double(s[l]), 376.0, 376.0 * 0.05) << "level " << l << ", set step " << w.set_step[l];
      }
    }
  // Samples in time order, from the first window.
  EXPECT_EQ(w.samples[0].time_ns, 0u);
  EXPECT_LT(w.samples[0].time_ns, w.samples[2].time_ns);
}

TEST(EstimateTrace, ControlHasNoFinding) { expect_none(traced(testing::control())); }

TEST(EstimateTrace, OverlapIsTheShareOfTracedTimeWithTwoThreadsStepping) {
  profile::Profile p;
  p.meta.mode = uint32_t(profile::Mode::Soft);
  auto win = [](uint32_t thread, uint32_t epoch, uint64_t a, uint64_t b) {
    profile::TraceRecord r{};
    r.thread = thread, r.epoch = epoch, r.start_ns = a, r.end_ns = b;
    return r;
  };
  p.traces = {win(0, 1, 0, 100), win(1, 1, 50, 200), win(0, 2, 1000, 1100)};
  TraceSummary s = trace_summary(p);
  EXPECT_EQ(s.epochs, 2u);
  EXPECT_EQ(s.threads, 2u);
  EXPECT_DOUBLE_EQ(s.overlap, 50.0 / 200.0);  // epoch 2 has one window: not counted
  EXPECT_EQ(s.paired_epochs, 0u);
  // Epoch 3 traced only thread 1: replayed with epoch 2, their 200 ns count with no overlap.
  p.traces.push_back(win(1, 3, 2000, 2100));
  s = trace_summary(p);
  EXPECT_EQ(s.paired_epochs, 2u);
  EXPECT_DOUBLE_EQ(s.overlap, 50.0 / 400.0);
  p.traces = {win(0, 1, 0, 100)};
  EXPECT_LT(trace_summary(p).overlap, 0);
}

TEST(EstimateTrace, AnAccessNamingAMissingWindowIsAnError) {
  profile::Profile p = testing::traced_profile(testing::control(), {});
  p.trace_accesses[5].window = uint32_t(p.traces.size());
  EXPECT_FALSE(estimate(p).ok());
}

}  // namespace
}  // namespace whymiss::analysis
