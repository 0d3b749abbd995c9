// The analysis on synthetic profiles: each pattern gets the verdict CachePerf's rules give, and
// the significance filters keep small or cheap problems out.
#include <gtest/gtest.h>

#include "analysis/analysis.h"

namespace whymiss::analysis {
namespace {

using namespace profile;
constexpr int kCap = 2, kConf = 3, kTS = 4, kFS = 5;

// A profile with `accesses` L1 accesses of which the given misses (by kind) at L1.
Profile base(uint64_t accesses, uint64_t misses_by_kind[kKinds]) {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.geometry.levels = {{"L1", 48 * 1024, 12, 64}, {"L2", 1 << 20, 16, 64}, {"L3", 32u << 20, 16, 64}};
  p.counters.resize(3);
  uint64_t miss = 0;
  for (int k = 1; k < kKinds; ++k) {
    p.counters[0].by_kind[k][0] = misses_by_kind[k];
    miss += misses_by_kind[k];
  }
  p.counters[0].by_kind[0][0] = accesses - miss;
  return p;
}

InstructionRecord instr(uint64_t ip, uint64_t accesses, int level, int kind, uint64_t misses) {
  InstructionRecord r{};
  r.ip = ip;
  r.accesses[0] = accesses;
  r.misses[level][kind] = misses;
  return r;
}

ObjectRecord object(uint64_t serial, uint64_t start, uint64_t size, uint32_t thread, uint64_t users) {
  ObjectRecord o{};
  o.serial = serial;
  o.start = start;
  o.size = size;
  o.alloc_thread = thread;
  o.site = kNoSite;
  o.thread_mask = users;
  o.misses[kFS] = 100;
  return o;
}

LineRecord line(uint64_t l, uint64_t fs, uint64_t ts, uint64_t ip) {
  LineRecord r{};
  r.line = l;
  r.misses[kFS] = fs;
  r.misses[kTS] = ts;
  for (auto& t : r.threads) t = kNoThread;
  r.threads[0] = 0;
  r.write_mask[0] = 0xFF;
  r.threads[1] = 1;
  r.write_mask[1] = 0xFF00;
  r.thread_count = 2;
  r.ips[0] = ip;
  return r;
}

TEST(Analysis, FalseSharingOnAGlobalIsTheApplications) {
  uint64_t m[kKinds] = {0, 2, 0, 0, 0, 10000};
  Profile p = base(20000, m);
  p.instructions.push_back(instr(0x400100, 20000, 0, kFS, 10000));
  p.lines.push_back(line(0x1000, 10000, 0, 0x400100));
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  const Finding& f = a.findings[0];
  EXPECT_EQ(f.kind, Kind::FalseSharing);
  EXPECT_EQ(f.origin, Origin::Application);
  EXPECT_EQ(f.misses, 10000u);
  EXPECT_NEAR(f.share, 10000.0 / 10002, 1e-9);
  ASSERT_EQ(f.line_threads.size(), 2u);
  EXPECT_EQ(byte_ranges(f.line_threads[1].write_mask, 1), "8-15");
  ASSERT_EQ(f.objects.size(), 1u);
  EXPECT_FALSE(f.objects[0].heap);
  EXPECT_EQ(f.objects[0].sample_addr, 0x1000u * 64);
}

TEST(Analysis, ObjectsOfDifferentThreadsOnALineBlameTheAllocator) {
  uint64_t m[kKinds] = {0, 2, 0, 0, 0, 10000};
  Profile p = base(20000, m);
  p.instructions.push_back(instr(0x400100, 20000, 0, kFS, 10000));
  LineRecord l = line(0x1000, 10000, 0, 0x400100);
  l.objects[0] = 1;
  l.objects[1] = 2;
  l.object_count = 2;
  p.lines.push_back(l);
  p.objects.push_back(object(1, 0x1000 * 64, 16, 1, 0b010));
  p.objects.push_back(object(2, 0x1000 * 64 + 32, 16, 2, 0b100));
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::FalseSharing);
  EXPECT_EQ(a.findings[0].origin, Origin::Allocator);
  // Same objects but both allocated by one thread: the application laid them out.
  p.objects[1].alloc_thread = 1;
  EXPECT_EQ(analyze(p).findings[0].origin, Origin::Application);
}

// A lock word: every thread writes bytes 0-3, and most misses land on bytes the last writer did
// not write (the mutex's kind field is read first). Giving each thread its own line cannot
// separate them: true sharing. A line whose main thread wrote all of it once but whose workers
// write their own bytes stays false sharing.
TEST(Analysis, MissesOnALineWhoseWritersAllWriteCommonBytesAreTrueSharing) {
  uint64_t m[kKinds] = {0, 2, 0, 0, 1000, 9000};
  Profile p = base(20000, m);
  p.instructions.push_back(instr(0x400100, 20000, 0, kFS, 9000));
  LineRecord l = line(0x1000, 9000, 1000, 0x400100);
  l.threads[2] = 2;
  l.thread_count = 3;
  for (int i = 0; i < 3; ++i) l.write_mask[i] = 0x0F, l.read_mask[i] = 0xF0000;
  p.lines.push_back(l);
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::TrueSharing);
  EXPECT_EQ(a.findings[0].misses, 10000u);
  bool said = false;  // the counted kinds stay as counted; the moved ones are named
  for (const auto& e : a.findings[0].evidence) {
    if (e.key == "false_sharing_misses") EXPECT_EQ(e.text, "9000");
    if (e.key == "false_sharing_misses_on_common_bytes") said = e.text == "9000";
  }
  EXPECT_TRUE(said);

  LineRecord beside = l;  // thread 2 reads a field of its own beside the lock word: false sharing
  beside.write_mask[2] = 0;
  beside.read_mask[2] = 0xFF00000000;
  p.lines.back() = beside;
  ASSERT_EQ(analyze(p).findings.size(), 1u);
  EXPECT_EQ(analyze(p).findings[0].kind, Kind::FalseSharing);
  LineRecord own = l;  // thread 1 also writes a counter of its own: padding would still help
  own.write_mask[1] = 0x0F | 0xFF00000000;
  p.lines.back() = own;
  EXPECT_EQ(analyze(p).findings[0].kind, Kind::FalseSharing);

  l.write_mask[0] = 0xFFFF;  // main initialised both workers' bytes
  l.write_mask[1] = 0x00FF;
  l.write_mask[2] = 0xFF00;
  p.lines.back() = l;
  a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::FalseSharing);
}

TEST(Analysis, MostlyTrueSharingIsTrueSharing) {
  uint64_t m[kKinds] = {0, 2, 0, 0, 9000, 1000};
  Profile p = base(20000, m);
  p.instructions.push_back(instr(0x400100, 20000, 0, kTS, 9000));
  p.lines.push_back(line(0x1000, 1000, 9000, 0x400100));
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::TrueSharing);
  EXPECT_EQ(a.findings[0].origin, Origin::Application);
}

TEST(Analysis, ConflictOnOneObjectIsTheApplications) {
  uint64_t m[kKinds] = {0, 64, 0, 5000, 0, 0};
  Profile p = base(40000, m);
  InstructionRecord r = instr(0x400200, 40000, 0, kConf, 5000);
  r.objects[0] = 9;
  r.object_count = 1;
  r.l1_set_mask = 1;
  p.instructions.push_back(r);
  p.objects.push_back(object(9, 0x10000000, 512 * 1024, 0, 1));
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::Conflict);
  EXPECT_EQ(a.findings[0].origin, Origin::Application);
  EXPECT_EQ(a.findings[0].level, 0);
}

TEST(Analysis, ConflictOverAlignedHeapObjectsBlamesTheAllocator) {
  uint64_t m[kKinds] = {0, 64, 0, 5000, 0, 0};
  Profile p = base(40000, m);
  InstructionRecord r = instr(0x400200, 40000, 0, kConf, 5000);
  for (uint64_t s = 1; s <= 4; ++s) {
    r.objects[s - 1] = s;
    // All start 16 bytes into a page: same L1 sets.
    p.objects.push_back(object(s, 0x7f0000000010 + s * 0x41000, 256 * 1024, 0, 1));
  }
  r.object_count = 5;  // more than listed
  p.instructions.push_back(r);
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].origin, Origin::Allocator);
  // Staggered starts: no longer the allocator's doing.
  for (size_t i = 0; i < p.objects.size(); ++i) p.objects[i].start += i * 192;
  EXPECT_EQ(analyze(p).findings[0].origin, Origin::Application);
}

TEST(Analysis, AlignedObjectsThatEachConflictWithThemselvesAreTheApplications) {
  // Two matrices at the same set offset, each walked by column with a power-of-two row stride:
  // their conflict misses were evicted by each object's own lines, so staggering them would not
  // help; padding the rows would.
  uint64_t m[kKinds] = {0, 64, 0, 6000, 0, 0};
  Profile p = base(40000, m);
  InstructionRecord r = instr(0x400200, 40000, 0, kConf, 6000);
  for (uint64_t s = 1; s <= 2; ++s) {
    r.objects[s - 1] = s;
    ObjectRecord o = object(s, 0x7f0000000010 + s * 0x41000, 128 * 1024, 0, 1);
    o.misses[kConf] = 3000;
    o.self_conflicts = 2900;
    p.objects.push_back(o);
  }
  r.object_count = 2;
  p.instructions.push_back(r);
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].origin, Origin::Application);
  EXPECT_NE(a.findings[0].suggestion.find("pad"), std::string::npos) << a.findings[0].suggestion;
  // The same objects whose conflicts came from each other: the allocator's, "stagger".
  for (ObjectRecord& o : p.objects) o.self_conflicts = 100;
  a = analyze(p);
  EXPECT_EQ(a.findings[0].origin, Origin::Allocator);
  EXPECT_NE(a.findings[0].suggestion.find("stagger"), std::string::npos) << a.findings[0].suggestion;
}

TEST(Analysis, UnrolledLoopOverAlignedObjectsIsOneAllocatorConflict) {
  // A compiler unrolled `for k: sum += a[k][i]`: one instruction per object, all in set 0.
  uint64_t m[kKinds] = {0, 64, 0, 8000, 0, 0};
  Profile p = base(40000, m);
  for (uint64_t s = 1; s <= 4; ++s) {
    InstructionRecord r = instr(0x400200 + s * 7, 10000, 0, kConf, 2000);
    r.objects[0] = s;
    r.object_count = 1;
    r.l1_set_mask = 1;
    p.instructions.push_back(r);
    p.objects.push_back(object(s, 0x7f0000000010 + s * 0x41000, 256 * 1024, 0, 1));
  }
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].origin, Origin::Allocator);
  EXPECT_EQ(a.findings[0].instructions.size(), 4u);
  EXPECT_EQ(a.findings[0].misses, 8000u);
  // The same instructions far apart in the code (different functions) stay separate.
  for (size_t i = 0; i < p.instructions.size(); ++i) p.instructions[i].ip = 0x400000 + i * 0x10000;
  EXPECT_EQ(analyze(p).findings.size(), 4u);
}

// Each way of walking memory gets its own fix; without step evidence, the generic one.
TEST(Analysis, CapacityFixFollowsTheAccessPattern) {
  uint64_t m[kKinds] = {0, 64, 5000, 0, 0, 0};
  struct Case {
    uint64_t next, stride, pointer, irregular, checked;
    Pattern want;
    const char* words;
  } cases[] = {
      {900, 50, 0, 50, 50, Pattern::Sweep, "tile the loops"},
      {10, 950, 0, 40, 40, Pattern::Strided, "interchange the loops"},
      {10, 0, 900, 90, 990, Pattern::PointerChase, "traversal order"},
      {10, 0, 20, 970, 990, Pattern::Random, "partition"},
      {10, 0, 0, 990, 0, Pattern::Scattered, "pointer chasing"},
  };
  for (const Case& c : cases) {
    Profile p = base(40000, m);
    p.instructions.push_back(instr(0x400200, 40000, 0, kCap, 5000));
    StepRecord st{};
    st.ip = 0x400200;
    st.steps[kStepNext] = c.next;
    st.steps[kStepStride] = c.stride;
    st.steps[kStepPointer] = c.pointer;
    st.steps[kStepIrregular] = c.irregular;
    st.pointer_checked = c.checked;
    st.stride = 2112;
    p.steps.push_back(st);
    Analysis a = analyze(p);
    ASSERT_EQ(a.findings.size(), 1u);
    EXPECT_EQ(a.findings[0].pattern, c.want) << c.words;
    EXPECT_NE(a.findings[0].suggestion.find(c.words), std::string::npos) << a.findings[0].suggestion;
    if (c.want == Pattern::Strided) EXPECT_NE(a.findings[0].suggestion.find("2112 bytes"), std::string::npos);
    p.steps.clear();
    a = analyze(p);
    EXPECT_EQ(a.findings[0].pattern, Pattern::Unknown);
    EXPECT_NE(a.findings[0].suggestion.find("tile or block"), std::string::npos);
  }
}

TEST(Analysis, CapacityIsReportedWhereItCostsMost) {
  uint64_t m[kKinds] = {0, 100, 20000, 0, 0, 0};
  Profile p = base(160000, m);
  p.counters[1].by_kind[2][0] = 20000;  // L2 capacity misses too: they cost more per miss
  InstructionRecord r = instr(0x400300, 160000, 0, kCap, 20000);
  r.misses[1][kCap] = 20000;
  p.instructions.push_back(r);
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::Capacity);
  EXPECT_EQ(a.findings[0].level, 1);
  EXPECT_NE(a.findings[0].suggestion.find("L2"), std::string::npos);
}

TEST(Analysis, FindingsAreOrderedByCost) {
  uint64_t m[kKinds] = {0, 100, 3000, 0, 0, 6000};
  Profile p = base(100000, m);
  p.instructions.push_back(instr(0x400300, 50000, 0, kCap, 3000));
  p.instructions.push_back(instr(0x400100, 50000, 0, kFS, 6000));
  p.lines.push_back(line(0x1000, 6000, 0, 0x400100));
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 2u);
  EXPECT_EQ(a.findings[0].kind, Kind::FalseSharing);
  EXPECT_EQ(a.findings[1].kind, Kind::Capacity);
}

TEST(Analysis, LowMissRatesReportNothing) {
  uint64_t m[kKinds] = {0, 100, 200, 0, 0, 0};
  Profile p = base(1000000, m);  // 0.02% of loads miss
  p.instructions.push_back(instr(0x400300, 1000000, 0, kCap, 200));
  Analysis a = analyze(p);
  EXPECT_TRUE(a.findings.empty());
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find("below the reporting thresholds"), std::string::npos);
  Knobs k;
  k.min_load_miss_rate = k.min_store_miss_rate = 0;  // the gate is a knob
  EXPECT_EQ(analyze(p, k).findings.size(), 1u);
}

TEST(Analysis, MinorInstructionsAreFiltered) {
  uint64_t m[kKinds] = {0, 0, 100000, 500, 0, 0};
  Profile p = base(800000, m);
  p.instructions.push_back(instr(0x400300, 700000, 0, kCap, 100000));
  p.instructions.push_back(instr(0x400400, 100000, 0, kConf, 500));  // 0.5% of misses
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, Kind::Capacity);
}

TEST(Analysis, CompulsoryMissesAreNeverAFinding) {
  uint64_t m[kKinds] = {0, 50000, 0, 0, 0, 0};
  Profile p = base(100000, m);
  p.instructions.push_back(instr(0x400300, 100000, 0, 1, 50000));
  EXPECT_TRUE(analyze(p).findings.empty());
}

TEST(Analysis, ByteRanges) {
  EXPECT_EQ(byte_ranges(0xFF, 1), "0-7");
  EXPECT_EQ(byte_ranges(0xF0F, 1), "0-3,8-11");
  EXPECT_EQ(byte_ranges(0x3, 2), "0-3");
  EXPECT_EQ(byte_ranges(0, 1), "none");
}

}  // namespace
}  // namespace whymiss::analysis

namespace whymiss::analysis {
namespace {
TEST(Analysis, InstructionsWithAFewMissesAreNotListed) {
  uint64_t m[kKinds] = {0, 2, 0, 0, 0, 10000};
  Profile p = base(20000, m);
  p.instructions.push_back(instr(0x400100, 20000, 0, kFS, 9999));
  p.instructions.push_back(instr(0x400900, 2, 0, kFS, 1));  // a final read of the counters
  LineRecord l = line(0x1000, 10000, 0, 0x400100);
  l.ips[1] = 0x400900;
  p.lines.push_back(l);
  Analysis a = analyze(p);
  ASSERT_EQ(a.findings.size(), 1u);
  ASSERT_EQ(a.findings[0].instructions.size(), 1u);
  EXPECT_EQ(a.findings[0].instructions[0].ip, 0x400100u);
}
}  // namespace
}  // namespace whymiss::analysis
