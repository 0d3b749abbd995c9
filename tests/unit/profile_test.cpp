// The profile file: round trip, and one clear error for every way a file can be wrong.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "model/profile.h"

namespace whymiss::profile {
namespace {

namespace fs = std::filesystem;

Profile sample() {
  Profile p;
  p.meta.mode = uint32_t(Mode::Exact);
  p.meta.cores = 2;
  p.meta.accesses = 12345;
  p.meta.exited = 1;
  p.command = "./prog --flag";
  p.geometry_source = "--cache";
  p.geometry.levels = {{"L1", 48 * 1024, 12, 64}, {"L3", 32u << 20, 16, 64}};
  p.counters.resize(2);
  p.counters[0].by_kind[3][1] = 77;
  p.modules.push_back({ModuleRecord{0x1000, 0x1000, 0x5000, 0, 0}, "/bin/prog"});
  p.threads.push_back(ThreadRecord{0, 4242, 0, 0, 99, {1, 2, 3, 4}});
  InstructionRecord ir{};
  ir.ip = 0x401234;
  ir.misses[0][3] = 50;
  p.instructions.push_back(ir);
  LineRecord lr{};
  lr.line = 0x7f00000;
  lr.misses[5] = 10;
  p.lines.push_back(lr);
  ObjectRecord o{};
  o.serial = 7;
  o.size = 64;
  o.site = 0;
  p.objects.push_back(o);
  SiteRecord s{};
  s.depth = 2;
  s.frames[0] = 0x401000;
  p.sites.push_back(s);
  return p;
}

class ProfileFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("whymiss-profile-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = (dir_ / "p.data").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes `p` as a fresh file at path_ and reads it back.
  Result<Profile> round_trip(const Profile& p) {
    fs::remove(path_);
    EXPECT_TRUE(write_profile(path_, p).ok());
    return read_profile(path_);
  }
  std::vector<char> bytes() {
    std::ifstream f(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  void put(const std::vector<char>& b) {
    std::ofstream f(path_, std::ios::binary | std::ios::trunc);
    f.write(b.data(), std::streamsize(b.size()));
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(ProfileFile, RoundTrips) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  auto r = read_profile(path_);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->meta.accesses, 12345u);
  EXPECT_EQ(r->command, "./prog --flag");
  EXPECT_EQ(r->geometry.to_spec(), "L1=48K:12:64,L3=32M:16:64");
  EXPECT_EQ(r->counters[0].by_kind[3][1], 77u);
  ASSERT_EQ(r->modules.size(), 1u);
  EXPECT_EQ(r->modules[0].path, "/bin/prog");
  EXPECT_EQ(r->threads[0].tid, 4242u);
  EXPECT_EQ(r->instructions[0].misses[0][3], 50u);
  EXPECT_EQ(r->lines[0].misses[5], 10u);
  EXPECT_EQ(r->objects[0].serial, 7u);
  EXPECT_EQ(r->sites[0].frames[0], 0x401000u);
  // Written atomically: no temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ProfileFile, SamplingSectionsRoundTrip) {
  Profile p = sample();
  p.meta.mode = uint32_t(Mode::Soft);
  p.meta.samples = 3;
  p.meta.sample_period_ns = 250000;
  p.meta.capture_backend = uint32_t(CaptureBackend::Int3);
  p.meta.sample_source = uint32_t(SampleSource::TaskClock);
  p.meta.discarded[uint32_t(DiscardReason::Clobbered)] = 5;
  p.meta.discarded[uint32_t(DiscardReason::BufferFull)] = 9;
  for (uint32_t i = 0; i < 3; ++i) {
    SampleRecord s{};
    s.time_ns = 1000 + i;
    s.ip = 0x401000 + i;
    s.addr = 0x7f0000000000 + 8 * i;
    s.object = i;
    s.thread = i % 2;
    s.size = 8;
    s.flags = i ? kAccessWrite : kAccessRead;
    s.level = i == 2 ? kLevelUnknown : uint8_t(i);
    s.weight = 250000 + i;
    p.samples.push_back(s);
  }
  WindowRecord w{};
  w.ip = 0x401001;
  w.start_ns = 2000;
  w.end_ns = 3000;
  w.captures = 2;
  w.dropped = 1;
  w.reason = 1;
  p.windows.push_back(w);
  for (uint32_t i = 0; i < 2; ++i) {
    CaptureRecord c{};
    c.time_ns = 2100 + i;
    c.ip = 0x401001;
    c.addr = 0x7f0000001000 + 64 * i;
    c.object = 7;
    c.thread = 1;
    c.window = 0;
    c.size = 4;
    c.flags = kAccessRead | kAccessWrite;
    p.captures.push_back(c);
  }
  p.notes.push_back({1, "breakpoints unavailable: no windows"});
  p.notes.push_back({0, "second note"});
  auto r = round_trip(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->meta.mode, uint32_t(Mode::Soft));
  EXPECT_EQ(r->meta.samples, 3u);
  EXPECT_EQ(r->meta.sample_period_ns, 250000u);
  EXPECT_EQ(r->meta.capture_backend, uint32_t(CaptureBackend::Int3));
  EXPECT_EQ(r->meta.sample_source, uint32_t(SampleSource::TaskClock));
  EXPECT_EQ(r->meta.discarded[uint32_t(DiscardReason::Clobbered)], 5u);
  EXPECT_EQ(r->meta.discarded[uint32_t(DiscardReason::BufferFull)], 9u);
  ASSERT_EQ(r->samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(std::memcmp(&r->samples[i], &p.samples[i], sizeof(SampleRecord)), 0) << "sample " << i;
  ASSERT_EQ(r->windows.size(), 1u);
  EXPECT_EQ(std::memcmp(&r->windows[0], &w, sizeof w), 0);
  ASSERT_EQ(r->captures.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::memcmp(&r->captures[i], &p.captures[i], sizeof(CaptureRecord)), 0) << "capture " << i;
  ASSERT_EQ(r->notes.size(), 2u);
  EXPECT_EQ(r->notes[0].severity, 1u);
  EXPECT_EQ(r->notes[0].text, "breakpoints unavailable: no windows");
  EXPECT_EQ(r->notes[1].severity, 0u);
  EXPECT_EQ(r->notes[1].text, "second note");
  // The exact-mode sections beside them are intact.
  EXPECT_EQ(r->command, "./prog --flag");
  EXPECT_EQ(r->objects[0].serial, 7u);
}

// Trace windows' accesses round-trip with when each ran and its marks; times that do not match
// the accesses one for one are refused.
TEST_F(ProfileFile, TraceTimesRoundTripAndMustMatchTheAccesses) {
  Profile p = sample();
  p.meta.mode = uint32_t(Mode::Soft);
  TraceRecord t{};
  t.thread = 1, t.epoch = 1, t.start_ns = 5000, t.end_ns = 9000, t.steps = 10, t.accesses = 2;
  p.traces.push_back(t);
  for (uint32_t i = 0; i < 2; ++i) {
    TraceAccessRecord a{};
    a.ip = 0x401000 + i, a.addr = 0x7f0000000000 + 8 * i, a.size = 8, a.flags = kAccessWrite;
    a.marks = i ? kTraceAfterSyscall : 0;
    p.trace_accesses.push_back(a);
    p.trace_times.push_back(5100 + 700 * i);
  }
  auto r = round_trip(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->trace_times, p.trace_times);
  ASSERT_EQ(r->trace_accesses.size(), 2u);
  EXPECT_EQ(r->trace_accesses[1].marks, kTraceAfterSyscall);
  p.trace_times.pop_back();
  auto bad = round_trip(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("times do not match"), std::string::npos) << bad.error();
}

// Reuse-distance histograms round-trip, and impossible values (NaN, a rate above 1, a line size
// that is not a power of two) are refused with one sentence instead of making nonsense curves.
TEST_F(ProfileFile, ReuseHistogramsRoundTripAndImpossibleOnesAreRefused) {
  Profile p = sample();
  ReuseRecord r{};
  r.line_bytes = 64;
  r.rate = 0.0625;
  r.cold = 3;
  r.weighted = 10;
  r.buckets[reuse_bucket(100)] = 7;
  p.reuse.push_back(r);
  auto ok = round_trip(p);
  ASSERT_TRUE(ok.ok()) << ok.error();
  ASSERT_EQ(ok->reuse.size(), 1u);
  EXPECT_EQ(ok->reuse[0].buckets[reuse_bucket(100)], 7);
  for (int bad = 0; bad < 3; ++bad) {
    Profile q = p;
    if (bad == 0) q.reuse[0].buckets[5] = std::nan("");
    if (bad == 1) q.reuse[0].rate = 2;
    if (bad == 2) q.reuse[0].line_bytes = 48;
    auto r2 = round_trip(q);
    ASSERT_FALSE(r2.ok()) << bad;
    EXPECT_NE(r2.error().find("reuse-distance histogram holds impossible values"), std::string::npos) << r2.error();
  }
}

// The reuse tracker's account of each line size (Section::ReuseInfo) round-trips; an unknown
// `how`, a rate of 0 or a line size that is not a power of two is refused with one sentence.
TEST_F(ProfileFile, ReuseInfoRoundTripsAndImpossibleOnesAreRefused) {
  Profile p = sample();
  p.reuse_info = {{64, kReuseEveryLine, 1, 0, 100}, {32, kReuseSampledBound, 0.25, 12, 40}};
  auto ok = round_trip(p);
  ASSERT_TRUE(ok.ok()) << ok.error();
  ASSERT_EQ(ok->reuse_info.size(), 2u);
  EXPECT_EQ(ok->reuse_info[1].line_bytes, 32u);
  EXPECT_EQ(ok->reuse_info[1].how, kReuseSampledBound);
  EXPECT_EQ(ok->reuse_info[1].rate, 0.25);
  EXPECT_EQ(ok->reuse_info[1].dropped, 12u);
  EXPECT_EQ(ok->reuse_info[1].lines, 40u);
  for (int bad = 0; bad < 3; ++bad) {
    Profile q = p;
    if (bad == 0) q.reuse_info[1].how = 7;
    if (bad == 1) q.reuse_info[1].rate = 0;
    if (bad == 2) q.reuse_info[1].line_bytes = 48;
    auto r2 = round_trip(q);
    ASSERT_FALSE(r2.ok()) << bad;
    EXPECT_NE(r2.error().find("reuse tracker's description holds impossible values"), std::string::npos) << r2.error();
  }
}

// Soft mode's mutex hand-over counts (Section::Locks) round-trip; more hand-overs than
// acquisitions, or two records, are refused with one sentence each.
TEST_F(ProfileFile, LockCountsRoundTripAndImpossibleOnesAreRefused) {
  Profile p = sample();
  p.locks.push_back({1000, 7, 300, 120, 5, 0});
  auto ok = round_trip(p);
  ASSERT_TRUE(ok.ok()) << ok.error();
  ASSERT_EQ(ok->locks.size(), 1u);
  EXPECT_EQ(ok->locks[0].native_acquisitions, 1000u);
  EXPECT_EQ(ok->locks[0].native_handovers, 7u);
  EXPECT_EQ(ok->locks[0].traced_acquisitions, 300u);
  EXPECT_EQ(ok->locks[0].traced_handovers, 120u);
  EXPECT_EQ(ok->locks[0].untracked, 5u);
  for (int bad = 0; bad < 3; ++bad) {
    Profile q = p;
    if (bad == 0) q.locks[0].native_handovers = 1001;
    if (bad == 1) q.locks[0].traced_handovers = 301;
    if (bad == 2) q.locks.push_back(q.locks[0]);
    auto r2 = round_trip(q);
    ASSERT_FALSE(r2.ok()) << bad;
    if (bad < 2) EXPECT_NE(r2.error().find("hand-over counts exceed"), std::string::npos) << r2.error();
    else EXPECT_NE(r2.error().find("more than one record of mutex hand-over counts"), std::string::npos) << r2.error();
  }
}

// The data-flow and working-set sections round-trip; a record naming a missing site is refused.
TEST_F(ProfileFile, FlowAndWorkingSetRoundTripAndBadSitesAreRefused) {
  Profile p = sample();
  p.sites.resize(1);
  p.flow_info.push_back({});
  p.flow_info[0].objects = 3;
  FlowRecord f{};
  f.site = 0;
  f.from = 0;
  f.to = 1;
  f.from_kind = kFlowAlloc;
  f.to_kind = kFlowWrite;
  f.handovers = 5;
  p.flows.push_back(f);
  WorkingSetInfoRecord wi{};
  wi.samples = 1;
  p.working_set_info.push_back(wi);
  WorkingSetRecord w{};
  w.site = kWsNotHeap;
  w.lines = 9;
  p.working_set.push_back(w);
  auto ok = round_trip(p);
  ASSERT_TRUE(ok.ok()) << ok.error();
  ASSERT_EQ(ok->flows.size(), 1u);
  EXPECT_EQ(ok->flows[0].handovers, 5u);
  EXPECT_EQ(ok->flow_info[0].objects, 3u);
  ASSERT_EQ(ok->working_set.size(), 1u);
  EXPECT_EQ(ok->working_set[0].lines, 9u);
  for (int bad = 0; bad < 3; ++bad) {
    Profile q = p;
    if (bad == 0) q.flows[0].site = 4;
    if (bad == 1) q.flows[0].to_kind = kFlowAlloc;
    if (bad == 2) q.working_set[0].sample = 1;
    auto r = round_trip(q);
    ASSERT_FALSE(r.ok()) << bad;
  }
}

// `record` streams the profile it keeps from its tables (write_profile_to_fd) instead of
// assembling the file in memory: the bytes must be encode_profile's, and a profile of several
// MiB must read back whole from a regular file (read in one piece) and from a pipe (read as it
// arrives). (A regular file cut short is refused by the size check before either read:
// TruncatedFileIsRejected.)
TEST_F(ProfileFile, StreamedBytesAreTheEncodedOnesAndReadBackFromFilesAndPipes) {
  Profile p = sample();
  p.access_log_info.push_back(AccessLogRecord{});
  for (uint64_t i = 0; i < (uint64_t(3) << 20) / 8 + 12345; ++i) p.access_log.push_back(i * 0x9E3779B97F4A7C15ull);
  p.access_log_info[0].capacity = p.access_log_info[0].kept = p.access_log_info[0].total = p.access_log.size();
  p.access_log_info[0].line = 64;
  const std::string encoded = encode_profile(p);
  int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write_profile_to_fd(fd, p), 0);
  ::close(fd);
  const std::vector<char> b = bytes();
  ASSERT_EQ(b.size(), encoded.size());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), encoded.begin()));
  auto from_file = read_profile(path_);
  ASSERT_TRUE(from_file.ok()) << from_file.error();
  EXPECT_EQ(from_file->access_log, p.access_log);
  // A pipe: its reader cannot know the size up front. (Should the reader stop early, closing
  // its end gives the writer EPIPE instead of blocking it on a full pipe.)
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const auto old_pipe = std::signal(SIGPIPE, SIG_IGN);
  std::thread writer([&] {
    EXPECT_EQ(write_profile_to_fd(fds[1], p), 0);
    ::close(fds[1]);
  });
  const std::string via_pipe = "/proc/self/fd/" + std::to_string(fds[0]);
  auto from_pipe = read_profile(via_pipe);
  ::close(fds[0]);
  writer.join();
  std::signal(SIGPIPE, old_pipe);
  ASSERT_TRUE(from_pipe.ok()) << from_pipe.error();
  EXPECT_EQ(from_pipe->access_log, p.access_log);
}

// A section made by a producer (SectionData::produce: soft mode streams its traced accesses
// from its store and spill file) gives the same file as the same records given whole, however
// the producer cuts them up; a producer that gives too few or too many bytes fails the write.
TEST_F(ProfileFile, AProducedSectionIsWrittenAsTheSameRecordsGivenWhole) {
  std::vector<TraceAccessRecord> recs(5000);
  for (size_t i = 0; i < recs.size(); ++i) recs[i] = {0x400000 + i, 0x7f0000000000 + 8 * i, i % 3, 0, 8, kAccessRead, 0};
  std::vector<TraceRecord> win(1);
  win[0].accesses = uint32_t(recs.size());
  struct Cut {
    const std::vector<TraceAccessRecord>* recs;
    size_t drop;  // bytes left out at the end (0: all)
    size_t extra;  // bytes added
  };
  auto produce = [](const void* arg, PutBytes put, void* ctx) {
    const Cut& c = *static_cast<const Cut*>(arg);
    const auto* b = reinterpret_cast<const uint8_t*>(c.recs->data());
    const size_t n = c.recs->size() * sizeof(TraceAccessRecord) - c.drop;
    for (size_t at = 0, piece = 1; at < n; at += piece, piece = piece * 3 % 1021 + 1)  // uneven cuts
      if (!put(ctx, b + at, std::min(piece, n - at))) return false;
    static const uint8_t zeros[64] = {};
    return !c.extra || put(ctx, zeros, c.extra);
  };
  MetaRecord meta{};
  meta.mode = uint32_t(Mode::Soft);
  meta.command_str = meta.geometry_source_str = kNoString;
  auto write = [&](const char* path, const Cut* cut) {
    LevelRecord level{32768, 8, 64, "L1"};
    CounterRecord counters{};
    SectionData whole[] = {{Section::Meta, sizeof meta, 1, &meta},
                           {Section::Levels, sizeof level, 1, &level},
                           {Section::Counters, sizeof counters, 1, &counters},
                           {Section::Traces, sizeof(TraceRecord), 1, win.data()},
                           {Section::TraceAccesses, sizeof(TraceAccessRecord), recs.size(), recs.data()}};
    if (cut) whole[4] = {Section::TraceAccesses, sizeof(TraceAccessRecord), recs.size(), nullptr, produce, cut};
    return write_profile_sections(path, whole, 5);
  };
  const std::string a = (dir_ / "whole.data").string(), b = (dir_ / "produced.data").string();
  ASSERT_EQ(write(a.c_str(), nullptr), 0);
  const Cut all{&recs, 0, 0};
  ASSERT_EQ(write(b.c_str(), &all), 0);
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  ASSERT_GT(ba.size(), recs.size() * sizeof(TraceAccessRecord));
  EXPECT_TRUE(ba == bb);
  auto r = read_profile(b);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->trace_accesses.size(), recs.size());
  EXPECT_EQ(r->trace_accesses[4321].addr, recs[4321].addr);
  const Cut short_by{&recs, 8, 0}, long_by{&recs, 0, 8};
  const std::string c = (dir_ / "bad.data").string();
  EXPECT_EQ(write(c.c_str(), &short_by), EIO);
  EXPECT_EQ(write(c.c_str(), &long_by), EIO);
  EXPECT_FALSE(fs::exists(c)) << "a failed write leaves no file";
}

TEST_F(ProfileFile, TruncatedFileIsRejected) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  auto b = bytes();
  b.resize(b.size() - 10);
  put(b);
  auto r = read_profile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("truncated"), std::string::npos) << r.error();
}

TEST_F(ProfileFile, CorruptByteIsRejected) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  auto b = bytes();
  b[b.size() / 2] ^= 0x40;
  put(b);
  auto r = read_profile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("checksum"), std::string::npos) << r.error();
}

TEST_F(ProfileFile, ForeignFileIsRejected) {
  put(std::vector<char>(200, 'x'));
  auto r = read_profile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not a valid whymiss profile"), std::string::npos);
  put({});
  EXPECT_FALSE(read_profile(path_).ok());
}

TEST_F(ProfileFile, OtherVersionIsNamed) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  auto b = bytes();
  b[8] = 99;  // FileHeader::version
  put(b);
  auto r = read_profile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("version 99"), std::string::npos) << r.error();
}

// Format 2's checksum: the writer streams it over section headers and records of many sizes; the
// reader takes it over the file's bytes in one piece. Equal, or no profile would read back.
TEST_F(ProfileFile, ChecksumCoversEveryByteAfterTheHeader) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  auto b = bytes();
  FileHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  EXPECT_EQ(h.version, kVersion);
  EXPECT_EQ(h.checksum, checksum(b.data() + sizeof h, b.size() - sizeof h));
  // Any one flipped bit after the header, and a pair that a plain multiply chain would let
  // cancel out (the top bit of two words four apart, i.e. of one lane), is a corrupt file.
  const size_t n = b.size() - sizeof h;
  ASSERT_GT(n, 64u);
  for (size_t at : {size_t(0), size_t(7), n / 2, n - 1})
    for (int bit : {0, 7}) {
      auto c = b;
      c[sizeof h + at] = char(c[sizeof h + at] ^ (1 << bit));
      put(c);
      auto r = read_profile(path_);
      ASSERT_FALSE(r.ok()) << at << " " << bit;
      EXPECT_NE(r.error().find("checksum"), std::string::npos) << r.error();
    }
  auto c = b;
  c[sizeof h + 7] = char(c[sizeof h + 7] ^ 0x80);
  c[sizeof h + 32 + 7] = char(c[sizeof h + 32 + 7] ^ 0x80);
  put(c);
  EXPECT_FALSE(read_profile(path_).ok());
  // Another length is another sum, trailing zero bytes included.
  std::vector<uint8_t> data(1001);
  for (size_t i = 0; i < 1000; ++i) data[i] = uint8_t(i * 131 + 7);
  EXPECT_NE(checksum(data.data(), 999), checksum(data.data(), 1000));
  EXPECT_NE(checksum(data.data(), 1000), checksum(data.data(), 1001));
}

// The values themselves are the format: format-2 files on disk stay readable only while the sum
// of given bytes never changes. (Computed by the first format-2 build, git 694bf1a.)
TEST(ProfileChecksum, ValuesArePinned) {
  std::vector<uint8_t> d(100);
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(i);
  EXPECT_EQ(checksum(d.data(), 100), 0xad2eb0763650f254ull);
  EXPECT_EQ(checksum(d.data(), 0), 0x51400c1769ceb4b3ull);
  EXPECT_EQ(checksum(d.data(), 33), 0x6df2b45b27a43b3aull);
}

// The writer sums section headers and records piece by piece; the reader sums the file in one
// piece. Sections of every record size and count up to 40 bytes, in many splits, must agree.
TEST(ProfileChecksum, PiecesGiveTheSumOfTheWhole) {
  std::vector<uint8_t> buf[8];
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1103515245u + 12345u; };
  for (int round = 0; round < 300; ++round) {
    SectionData sections[8];
    const uint32_t n = 1 + next() % 8;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t size = 1 + next() % 9, count = next() % 5;
      buf[i].resize(size_t(size) * count);
      for (auto& b : buf[i]) b = uint8_t(next() >> 16);
      sections[i] = SectionData{Section::Strings, size, count, count ? buf[i].data() : nullptr};
    }
    const int fd = memfd_create("sections", 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write_profile_fd(fd, sections, n), 0);
    std::string bytes(size_t(lseek(fd, 0, SEEK_END)), '\0');
    ASSERT_EQ(pread(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
    close(fd);
    ASSERT_GE(bytes.size(), sizeof(FileHeader));
    FileHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    ASSERT_EQ(h.checksum, checksum(bytes.data() + sizeof h, bytes.size() - sizeof h)) << round;
  }
}

// Profiles written before format 2 (FNV-1a checksum) still read, with the same content.
TEST_F(ProfileFile, FormatOneStillReads) {
  ASSERT_TRUE(write_profile(path_, sample()).ok());
  const auto now = read_profile(path_);
  ASSERT_TRUE(now.ok()) << now.error();
  auto b = bytes();
  FileHeader h;
  std::memcpy(&h, b.data(), sizeof h);
  h.version = 1;
  uint64_t sum = 0xcbf29ce484222325ull;
  for (size_t i = sizeof h; i < b.size(); ++i) sum = (sum ^ uint8_t(b[i])) * 0x100000001b3ull;
  h.checksum = sum;
  std::memcpy(b.data(), &h, sizeof h);
  put(b);
  auto old = read_profile(path_);
  ASSERT_TRUE(old.ok()) << old.error();
  EXPECT_EQ(old.value().meta.accesses, now.value().meta.accesses);
  EXPECT_EQ(old.value().instructions.size(), now.value().instructions.size());
  // ... and a format-1 file is checked with format 1's sum, not format 2's.
  h.checksum = checksum(b.data() + sizeof h, b.size() - sizeof h);
  std::memcpy(b.data(), &h, sizeof h);
  put(b);
  EXPECT_FALSE(read_profile(path_).ok());
}

TEST_F(ProfileFile, MissingFileIsOneSentence) {
  auto r = read_profile((dir_ / "nope").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot open profile"), std::string::npos);
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
}

TEST_F(ProfileFile, UnwritableDirectoryFailsCleanly) {
  auto st = write_profile((dir_ / "no" / "such" / "dir" / "p").string(), sample());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("cannot write profile"), std::string::npos);
}

}  // namespace
}  // namespace whymiss::profile
