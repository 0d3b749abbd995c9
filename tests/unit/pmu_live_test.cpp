// The live path on the real kernel. Hardware sampling is absent here, so (1) opening the
// detected kind of plan must fail cleanly and leave the sampler usable, and (2) the ring, the
// parser and the decoder are checked end to end against the kernel itself with a software
// event that fills the same PEBS sample format: page faults, whose ADDR is the faulting
// address, so every sample's fields can be compared with what the test did.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "runtime/pmu/live.h"

namespace whymiss::pmu {
namespace {

struct Kept {
  std::vector<std::pair<uint32_t, profile::SampleRecord>> v;
  static void fn(void* c, uint32_t tid, const profile::SampleRecord& r) {
    static_cast<Kept*>(c)->v.push_back({tid, r});
  }
};

pid_t self_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(PmuLive, OpeningAPlanThisMachineCannotServeFailsCleanly) {
  Plan p;
  p.backend = Backend::AmdIbs;
  p.event_count = 1;
  p.events[0].type = 0x7ffffff0;  // no such PMU type
  p.events[0].role = Role::Ops;
  p.sample_type = kIbsSampleType;
  p.period = 0x40000;
  Kept k;
  LiveSampler s;
  ASSERT_EQ(s.init(p, 3, 2, 1, {Kept::fn, &k}), 0);
  for (int i = 0; i < 5; ++i) {  // more attempts than slots: failures must free their slot
    int err = s.open_for_thread(self_tid());
    EXPECT_NE(err, 0);
    EXPECT_NE(err, ENOSPC);
  }
  EXPECT_EQ(s.threads_opened(), 0u);
  EXPECT_EQ(s.drain(), 0u);
  s.close_all();
}

TEST(PmuLive, InitRejectsBadPlans) {
  Kept k;
  LiveSampler s;
  EXPECT_EQ(s.init(Plan{}, 3, 4, 1, {Kept::fn, &k}), EINVAL);
  EXPECT_EQ(s.open_for_thread(self_tid()), EINVAL);
}

TEST(PmuLive, KernelWrittenRingsDecodeToTheAccessesMade) {
  Plan p;
  p.backend = Backend::IntelPebs;
  p.event_count = 1;
  p.events[0].type = PERF_TYPE_SOFTWARE;
  p.events[0].config = PERF_COUNT_SW_PAGE_FAULTS;
  p.events[0].role = Role::Loads;
  p.sample_type = kPebsSampleType;
  p.period = 1;
  p.ring_pages = 1;  // small, so the test also laps the ring
  Kept k;
  LiveSampler s;
  ASSERT_EQ(s.init(p, 3, 4, 1, {Kept::fn, &k}), 0);
  const pid_t tid = self_tid();
  int err = s.open_for_thread(tid);
  if (err == EACCES || err == EPERM) GTEST_SKIP() << "perf_event_open not permitted here";
  ASSERT_EQ(err, 0) << std::strerror(err);

  const long page = sysconf(_SC_PAGESIZE);
  const int kPages = 300;  // ~72-byte records: more than one 4 KiB ring's worth
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  auto* mem = static_cast<uint8_t*>(
      mmap(nullptr, page * kPages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  std::set<uint64_t> touched;
  for (int i = 0; i < kPages; ++i) {
    volatile uint8_t* at = mem + i * page + 8 + (i % 7) * 8;
    *at = 1;  // first touch: one page fault at exactly this address
    touched.insert(reinterpret_cast<uint64_t>(at));
    if (i % 16 == 15) s.drain();
  }
  s.retire_thread(tid);
  s.drain();  // final drain and close
  timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  munmap(mem, page * kPages);

  const DecoderCounters c = s.decoder_totals();
  EXPECT_EQ(c.malformed, 0u);
  EXPECT_EQ(s.ring_totals().corrupt, 0u);
  EXPECT_GT(s.ring_totals().bytes, uint64_t(page));  // lapped the one-page ring
  EXPECT_EQ(c.period_sum, c.samples);  // period 1
  std::set<uint64_t> seen;
  const uint64_t lo = uint64_t(t0.tv_sec) * 1000000000ull + t0.tv_nsec;
  const uint64_t hi = uint64_t(t1.tv_sec) * 1000000000ull + t1.tv_nsec;
  uint64_t last = 0;
  for (const auto& [t, r] : k.v) {
    EXPECT_EQ(t, static_cast<uint32_t>(tid));
    EXPECT_GE(r.time_ns, lo);  // CLOCK_MONOTONIC, as the plan asks
    EXPECT_LE(r.time_ns, hi);
    EXPECT_GE(r.time_ns, last);
    last = r.time_ns;
    EXPECT_EQ(r.level, profile::kLevelUnknown);  // software events carry no data source
    if (touched.count(r.addr)) seen.insert(r.addr);
  }
  // Every first touch faulted once and was sampled, unless the ring overflowed (counted).
  EXPECT_GE(seen.size() + c.lost, touched.size()) << "lost " << c.lost;
  if (c.lost == 0) {
    EXPECT_EQ(seen.size(), touched.size());
  }
  EXPECT_GT(seen.size(), touched.size() / 2);
  s.close_all();
}

}  // namespace
}  // namespace whymiss::pmu

namespace whymiss::pmu {
namespace {

// The IBS sample format (RAW, PERIOD, IDENTIFIER) as the kernel lays it out: a software event
// carries an empty raw field (a u32 size of 4 and four zero bytes), which is enough to check
// where every field sits. Opened directly so each record reaches parse_sample().
TEST(PmuLive, KernelWrittenIbsFormatParses) {
  Plan p;
  p.backend = Backend::AmdIbs;
  p.event_count = 1;
  p.events[0].type = PERF_TYPE_SOFTWARE;
  p.events[0].config = PERF_COUNT_SW_PAGE_FAULTS;
  p.events[0].role = Role::Ops;
  p.sample_type = kIbsSampleType;
  p.period = 1;
  p.ring_pages = 2;
  perf_event_attr a;
  fill_attr(p, 0, 1, &a);
  a.exclude_kernel = a.exclude_hv = 1;
  const pid_t tid = self_tid();
  long fd = syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) GTEST_SKIP() << "perf_event_open not permitted here";
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const long page = sysconf(_SC_PAGESIZE);
  const size_t map_bytes = page * (1 + p.ring_pages);
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* mem = static_cast<uint8_t*>(
      mmap(nullptr, page * 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  for (int i = 0; i < 16; ++i) *reinterpret_cast<volatile uint8_t*>(mem + i * page) = 1;
  struct Check {
    pid_t tid;
    int samples = 0, bad = 0;
    static void fn(void* c, const uint8_t* rec, size_t size) {
      auto* self = static_cast<Check*>(c);
      perf_event_header h;
      std::memcpy(&h, rec, sizeof h);
      if (h.type != PERF_RECORD_SAMPLE) return;
      RawSample s;
      ++self->samples;
      if (!parse_sample(kIbsSampleType, rec, size, &s) || s.tid != uint32_t(self->tid) ||
          s.period != 1 || s.raw_size != 4 || s.raw[0] != 0)
        ++self->bad;
    }
  } check{tid};
  RingReader r;
  ASSERT_TRUE(r.attach(static_cast<uint8_t*>(m), map_bytes, page));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  r.drain(Check::fn, &check, scratch.data());
  munmap(mem, page * 16);
  munmap(m, map_bytes);
  close(static_cast<int>(fd));
  EXPECT_GE(check.samples, 16);
  EXPECT_EQ(check.bad, 0);
}

}  // namespace
}  // namespace whymiss::pmu
