// Workload patterns as PEBS and IBS would report them, through the whole sampled path: one
// kernel-layout ring per thread -> RingReader -> Decoder -> SampleRecords with thread indices
// and heap objects (as the runtime's sink assigns them). Two layers of assertions:
//  - the evidence itself (same line, disjoint words, writers, HITM; one instruction, one set,
//    more lines than ways, footprint below L1);
//  - down to findings: the samples go into a pmu profile, through the profile file, then
//    analysis::estimate() and analyze(), and the top finding must be the kind, origin and level
//    exact mode reports for the same program (false sharing / conflict, application /
//    allocator, at L1), with a fixed twin that must not be reported as a conflict.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/estimate.h"
#include "model/geometry.h"
#include "pmu_synth.h"
#include "runtime/pmu/levels.h"
#include "runtime/pmu/plan.h"
#include "runtime/pmu/ring.h"
#include "runtime/pmu/sample.h"

namespace whymiss::pmu {
namespace {

using profile::SampleRecord;
using synth::data_src;

constexpr uint32_t kZen4Caps = (1u << 0) | (1u << 2) | (1u << 7) | (1u << 11);

// One access the pattern makes and how the hardware classified it.
struct Access {
  uint32_t tid;
  uint64_t ip, addr;
  bool store;
  enum Where { L1Hit, L2Hit, SharedModified, L2Miss } where;
};

// What the runtime's sink does: thread ids become indices in order of first sample.
// Heap objects are looked up by address, as the runtime's object store does.
struct Collector {
  std::map<uint32_t, uint32_t> index;
  std::vector<SampleRecord> samples;
  const std::vector<profile::ObjectRecord>* objects = nullptr;
  static void fn(void* c, uint32_t tid, const SampleRecord& r) {
    auto* self = static_cast<Collector*>(c);
    auto it = self->index.emplace(tid, static_cast<uint32_t>(self->index.size())).first;
    SampleRecord s = r;
    s.thread = it->second;
    if (self->objects)
      for (const auto& o : *self->objects)
        if (s.addr >= o.start && s.addr < o.start + o.size) s.object = o.serial;
    self->samples.push_back(s);
  }
};

std::vector<uint8_t> pebs_record(const Access& a, uint64_t t, uint64_t period) {
  synth::Sample s;
  s.tid = s.pid = a.tid;
  s.ip = a.ip;
  s.addr = a.addr;
  s.time = t;
  s.period = period;
  s.id = a.store ? 2 : 1;
  using E = Access;
  if (a.store) {  // PEBS stores only know L1 hit or miss
    s.data_src = data_src(PERF_MEM_OP_STORE,
                          PERF_MEM_LVL_L1 | (a.where == E::L1Hit ? PERF_MEM_LVL_HIT : PERF_MEM_LVL_MISS),
                          PERF_MEM_SNOOP_NA);
  } else {
    s.weight = a.where == E::L1Hit ? 5 : a.where == E::L2Hit ? 16 : 80;
    uint64_t lvl = a.where == E::L1Hit ? PERF_MEM_LVL_L1 : a.where == E::L2Hit ? PERF_MEM_LVL_L2
                                                                                 : PERF_MEM_LVL_L3;
    s.data_src = data_src(PERF_MEM_OP_LOAD, lvl | PERF_MEM_LVL_HIT,
                          a.where == E::SharedModified ? PERF_MEM_SNOOP_HITM : PERF_MEM_SNOOP_NONE);
  }
  return synth::sample_record(kPebsSampleType, s);
}

std::vector<uint8_t> ibs_record(const Access& a, uint64_t t, uint64_t period) {
  synth::IbsRegs r;
  r.caps = kZen4Caps;
  r.rip = a.ip;
  r.linaddr = a.addr;
  const bool miss = a.where != Access::L1Hit, l2miss = miss && a.where != Access::L2Hit;
  r.data3 = synth::ibs_data3(!a.store, a.store, miss, l2miss, true, miss ? 60 : 0);
  if (!a.store && a.where == Access::SharedModified) r.data2 = synth::ibs_data2(1, false, false);
  synth::Sample s;
  s.tid = s.pid = a.tid;
  s.ip = a.ip + 3;  // the interrupted ip; the decoder must take IBS_OP_RIP
  s.time = t;
  s.period = period;
  s.raw = synth::ibs_raw(r);
  return synth::sample_record(kIbsSampleType, s);
}

// Writes each thread's accesses into its own ring (with a throttle pair in the middle),
// draining as the runtime would every 32 records, returns the samples and the summed counters.
std::vector<SampleRecord> run(profile::SampleSource src, const std::vector<Access>& accesses,
                              DecoderCounters* total,
                              const std::vector<profile::ObjectRecord>* objects = nullptr) {
  Collector col;
  col.objects = objects;
  std::map<uint32_t, std::vector<Access>> by_thread;
  for (const Access& a : accesses) by_thread[a.tid].push_back(a);
  *total = DecoderCounters{};
  const bool ibs = src == profile::SampleSource::Ibs;
  const uint64_t st = ibs ? kIbsSampleType : kPebsSampleType;
  for (auto& [tid, list] : by_thread) {
    synth::Ring ring(2);
    ring.reset_to(ring.data_size() - 40);  // start near the end: records wrap
    Plan plan;
    plan.backend = ibs ? Backend::AmdIbs : Backend::IntelPebs;
    plan.period = ibs ? 0x40000 : 10007;
    const uint64_t period = thread_period(plan, tid, 1);  // randomised per thread
    DecoderConfig cfg;
    cfg.source = src;
    cfg.sample_type = st;
    cfg.family = 0x19;
    cfg.model = 0x11;
    cfg.levels = 3;
    auto dec = Decoder::make(cfg, {Collector::fn, &col});
    EXPECT_TRUE(dec.ok());
    RingReader r;
    EXPECT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
    std::vector<uint8_t> scratch(kMaxRecordBytes);
    uint64_t t = 1000;
    for (size_t i = 0; i < list.size(); ++i) {
      t += 100;
      EXPECT_TRUE(ring.write(ibs ? ibs_record(list[i], t, period) : pebs_record(list[i], t, period)));
      if (i == list.size() / 2) {
        EXPECT_TRUE(ring.write(synth::throttle_record(st, true, t + 1, 1)));
        EXPECT_TRUE(ring.write(synth::throttle_record(st, false, t + 51, 1)));
      }
      if (i % 32 == 31) r.drain(Decoder::record_fn, &dec.value(), scratch.data());
    }
    r.drain(Decoder::record_fn, &dec.value(), scratch.data());
    EXPECT_GT(r.counters().wrapped, 0u);
    const DecoderCounters& c = dec->counters();
    EXPECT_EQ(c.period_sum, period * list.size());
    total->samples += c.samples;
    total->kept += c.kept;
    total->malformed += c.malformed;
    total->throttled_ns += c.throttled_ns;
  }
  return col.samples;
}

uint64_t word_mask(const SampleRecord& s, uint32_t line) {
  return 1ull << ((s.addr % line) / 8);
}

// Two threads increment their own counter in one cache line: `counters[t].v++` (a load and a
// store of the same 8-byte word, a different word per thread). Exact mode: false sharing.
std::vector<Access> false_sharing() {
  const uint64_t line = 0x7f0000001000;
  std::vector<Access> v;
  for (int i = 0; i < 64; ++i) {
    for (uint32_t t : {201u, 202u}) {
      const uint64_t addr = line + (t == 201 ? 0 : 8);
      v.push_back({t, 0x401100, addr, false, Access::SharedModified});
      v.push_back({t, 0x401104, addr, true, Access::L2Miss});
    }
    v.push_back({201, 0x401180, 0x7ffc0000 + uint64_t(i % 8) * 8, false, Access::L1Hit});  // stack
  }
  return v;
}

class PmuPattern : public ::testing::TestWithParam<profile::SampleSource> {};

TEST_P(PmuPattern, FalseSharingEvidence) {
  DecoderCounters c;
  auto samples = run(GetParam(), false_sharing(), &c);
  EXPECT_EQ(c.malformed, 0u);
  EXPECT_EQ(c.kept, samples.size());
  EXPECT_EQ(c.throttled_ns, 2 * 50u);
  const uint32_t line = default_geometry().line();
  std::map<uint64_t, std::vector<SampleRecord>> by_line;
  for (const auto& s : samples)
    if (s.level != 0) by_line[s.addr / line].push_back(s);
  ASSERT_EQ(by_line.size(), 1u);  // all misses on one line
  const auto& misses = by_line.begin()->second;
  EXPECT_EQ(misses.size(), 4u * 64);
  std::map<uint32_t, uint64_t> read_words, write_words;
  for (const auto& s : misses) {
    ASSERT_NE(s.level, profile::kLevelUnknown);
    if (s.flags & profile::kAccessWrite) write_words[s.thread] |= word_mask(s, line);
    if (s.flags & profile::kAccessRead) {
      read_words[s.thread] |= word_mask(s, line);
      EXPECT_TRUE(s.flags & profile::kSampleHitm) << "loads found the line modified elsewhere";
      EXPECT_EQ(s.level, 2);
    }
  }
  analysis::EstimateKnobs knobs;
  EXPECT_GE(write_words.size(), knobs.min_threads_for_sharing);
  ASSERT_EQ(write_words.size(), 2u);
  // Each thread writes and reads only its own word: no byte is shared, so it is false sharing.
  EXPECT_EQ(write_words[0] & (write_words[1] | read_words[1]), 0u);
  EXPECT_EQ(write_words[1] & (write_words[0] | read_words[0]), 0u);
  EXPECT_NE(write_words[0], 0u);
  EXPECT_NE(write_words[1], 0u);
  // The stack loads of thread 201 stay L1 hits and are not misses.
  size_t hits = 0;
  for (const auto& s : samples) hits += s.level == 0;
  EXPECT_EQ(hits, 64u);
}

// One instruction walks a column of a 2-D array with an 8 KiB row stride: 24 lines, all
// mapping to one L1 set (64 sets x 64 B = 4 KiB period), more lines than the set's 12 ways.
// Exact mode: conflict misses at L1 (the data fits in L2, so it comes from L2).
TEST_P(PmuPattern, SingleSetConflictEvidence) {
  const CacheGeometry g = default_geometry();
  const auto& l1 = g.levels[0];
  std::vector<Access> v;
  const uint64_t base = 0x7f1000000000;
  for (int rep = 0; rep < 10; ++rep)
    for (uint64_t k = 0; k < 24; ++k) v.push_back({301, 0x401200, base + k * 8192, false, Access::L2Hit});
  DecoderCounters c;
  auto samples = run(GetParam(), v, &c);
  ASSERT_EQ(samples.size(), v.size());
  std::set<uint64_t> ips, sets, lines;
  for (const auto& s : samples) {
    EXPECT_EQ(s.level, 1) << "an L1 miss served by L2";
    EXPECT_EQ(s.flags & (profile::kAccessRead | profile::kAccessWrite), profile::kAccessRead);
    EXPECT_GT(s.weight, 0u);
    ips.insert(s.ip);
    sets.insert((s.addr / l1.line) % l1.sets());
    lines.insert(s.addr / l1.line);
  }
  EXPECT_EQ(ips, std::set<uint64_t>{0x401200});
  analysis::EstimateKnobs knobs;
  EXPECT_LE(sets.size(), 2u * l1.ways);  // concentration: all misses in <= 2*ways sets
  EXPECT_EQ(sets.size(), 1u);
  EXPECT_GE(1.0, knobs.set_concentration);
  EXPECT_GT(lines.size(), l1.ways);  // more lines than the set holds: they evict each other
  // ... while the footprint is far below L1's size: not capacity.
  EXPECT_LT(lines.size() * l1.line, l1.size);
}

INSTANTIATE_TEST_SUITE_P(Sources, PmuPattern,
                         ::testing::Values(profile::SampleSource::Pebs, profile::SampleSource::Ibs),
                         [](const auto& p) {
                           return std::string(p.param == profile::SampleSource::Pebs ? "Pebs" : "Ibs");
                         });

}  // namespace
}  // namespace whymiss::pmu

// ---- down to findings: decoded samples -> profile file -> estimate() -> analyze() ----
namespace whymiss::pmu {
namespace {

using analysis::Kind;
using analysis::Origin;

profile::ObjectRecord heap_object(uint64_t serial, uint64_t start, uint64_t size, uint32_t thread) {
  profile::ObjectRecord o{};
  o.serial = serial;
  o.start = start;
  o.size = size;
  o.alloc_thread = thread;
  o.site = profile::kNoSite;
  return o;
}

// What the pmu collector writes: mode, source, samples and the objects it saw. Goes through the
// profile file format (as `whymiss report` would read it), then the estimator and the analysis.
analysis::Analysis findings(profile::SampleSource src, const std::vector<Access>& accesses,
                            const std::vector<profile::ObjectRecord>& objects) {
  DecoderCounters c;
  profile::Profile p;
  p.samples = run(src, accesses, &c, &objects);
  p.meta.mode = uint32_t(profile::Mode::Pmu);
  p.meta.sample_source = uint32_t(src);
  p.meta.samples = p.samples.size();
  p.meta.sample_period_ns = c.samples ? c.period_sum / c.samples : 0;
  p.meta.exited = 1;
  std::set<uint32_t> threads;
  for (const auto& s : p.samples) threads.insert(s.thread);
  p.meta.threads_seen = threads.size();
  p.command = "synthetic pmu stream";
  p.geometry = default_geometry();
  p.geometry_source = "default";
  p.counters.resize(p.geometry.levels.size());
  p.objects = objects;
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& ch : name)
    if (ch == '/') ch = '_';
  const std::string path = ::testing::TempDir() + "pmu_pattern_" + std::to_string(getpid()) + "_" +
                           name + ".data";
  Status w = profile::write_profile(path, p);
  EXPECT_TRUE(w.ok()) << w.error();
  auto back = profile::read_profile(path);
  std::remove(path.c_str());
  EXPECT_TRUE(back.ok()) << back.error();
  if (!back.ok()) return {};
  EXPECT_EQ(back->samples.size(), p.samples.size());
  Status e = analysis::estimate(*back);
  EXPECT_TRUE(e.ok()) << e.error();
  return analysis::analyze(*back);
}

void expect_top(const analysis::Analysis& a, Kind kind, Origin origin, int level) {
  ASSERT_FALSE(a.findings.empty()) << (a.notes.empty() ? "no notes" : a.notes[0]);
  EXPECT_STREQ(analysis::kind_name(a.findings[0].kind), analysis::kind_name(kind));
  EXPECT_STREQ(analysis::origin_name(a.findings[0].origin), analysis::origin_name(origin));
  EXPECT_EQ(a.findings[0].level, level);
}

// Exact mode on this program: false sharing at L1, the application's (one array of counters).
TEST_P(PmuPattern, FalseSharingInOneObjectIsTheApplications) {
  std::vector<profile::ObjectRecord> objs = {heap_object(1, 0x7f0000001000, 64, 0)};
  auto a = findings(GetParam(), false_sharing(), objs);
  expect_top(a, Kind::FalseSharing, Origin::Application, 0);
  ASSERT_FALSE(a.findings.empty());
  EXPECT_EQ(a.findings[0].line_addr, 0x7f0000001000u);
  EXPECT_EQ(a.findings[0].line_threads.size(), 2u);
}

// The same accesses, but each counter is its own 8-byte heap object allocated by the thread
// that uses it, and the allocator put both in one line: exact mode blames the allocator.
TEST_P(PmuPattern, FalseSharingAcrossThreadsObjectsIsTheAllocators) {
  std::vector<profile::ObjectRecord> objs = {heap_object(1, 0x7f0000001000, 8, 0),
                                             heap_object(2, 0x7f0000001008, 8, 1)};
  expect_top(findings(GetParam(), false_sharing(), objs), Kind::FalseSharing, Origin::Allocator, 0);
}

std::vector<Access> column_walk(uint64_t base) {
  std::vector<Access> v;
  for (int rep = 0; rep < 10; ++rep)
    for (uint64_t k = 0; k < 24; ++k) v.push_back({301, 0x401200, base + k * 8192, false, Access::L2Hit});
  return v;
}

// Exact mode: conflict misses at L1 caused by the application's 8 KiB row stride.
TEST_P(PmuPattern, SingleSetColumnWalkIsAnApplicationConflict) {
  std::vector<profile::ObjectRecord> objs = {heap_object(1, 0x7f1000000000, 24 * 8192, 0)};
  expect_top(findings(GetParam(), column_walk(0x7f1000000000), objs), Kind::Conflict,
             Origin::Application, 0);
}

// 24 separate heap objects the allocator placed 8 KiB apart (same offset in the set period):
// exact mode blames the allocator.
TEST_P(PmuPattern, SingleSetAcrossHeapObjectsIsAnAllocatorConflict) {
  std::vector<profile::ObjectRecord> objs;
  for (uint64_t k = 0; k < 24; ++k) objs.push_back(heap_object(k + 1, 0x7f1000000000 + k * 8192, 64, 0));
  auto a = findings(GetParam(), column_walk(0x7f1000000000), objs);
  expect_top(a, Kind::Conflict, Origin::Allocator, 0);
  ASSERT_FALSE(a.findings.empty());
  EXPECT_GE(a.findings[0].objects.size(), 2u);
}

// The fixed twin: rows padded by one line spread the walk over 24 sets. Even if the hardware
// still reported L1 misses for it, they are not concentrated in a set: no conflict finding.
TEST_P(PmuPattern, PaddedColumnWalkIsNoConflict) {
  std::vector<Access> v;
  for (int rep = 0; rep < 10; ++rep)
    for (uint64_t k = 0; k < 24; ++k)
      v.push_back({301, 0x401200, 0x7f1000000000 + k * (8192 + 64), false, Access::L2Hit});
  auto a = findings(GetParam(), v, {});
  for (const auto& f : a.findings) EXPECT_NE(f.kind, Kind::Conflict);
}

}  // namespace
}  // namespace whymiss::pmu
