// RingReader against synthetic rings laid out as the kernel writes them.
#include <gtest/gtest.h>

#include <vector>

#include "pmu_synth.h"
#include "runtime/pmu/ring.h"
#include "runtime/pmu/sample.h"

namespace whymiss::pmu {
namespace {

using synth::Ring;

struct Collected {
  std::vector<std::vector<uint8_t>> recs;
  static void fn(void* ctx, const uint8_t* rec, size_t size) {
    static_cast<Collected*>(ctx)->recs.emplace_back(rec, rec + size);
  }
};

std::vector<uint8_t> numbered(uint64_t n, size_t body_words) {
  synth::Bytes b;
  for (size_t i = 0; i < body_words; ++i) b.u64(n * 1000 + i);
  return synth::record(PERF_RECORD_SAMPLE, 0, b.b);
}

TEST(PmuRing, DeliversRecordsInOrderAndPublishesTail) {
  Ring ring(1);
  std::vector<std::vector<uint8_t>> written;
  for (uint64_t i = 0; i < 5; ++i) {
    written.push_back(numbered(i, 1 + i));
    ASSERT_TRUE(ring.write(written.back()));
  }
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  EXPECT_EQ(r.pending(), ring.head());
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 5u);
  EXPECT_EQ(c.recs, written);
  EXPECT_EQ(ring.tail(), ring.head());
  EXPECT_EQ(r.pending(), 0u);
  EXPECT_EQ(r.counters().wrapped, 0u);
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 0u);  // nothing new
}

// Start just before the end so records straddle it; the header itself is split in one case.
class PmuRingWrap : public ::testing::TestWithParam<uint64_t> {};

TEST_P(PmuRingWrap, RecordsAcrossTheEndArriveIntact) {
  Ring ring(1);
  const uint64_t start = ring.data_size() * 3 - GetParam();  // head/tail keep counting up
  ring.reset_to(start);
  std::vector<std::vector<uint8_t>> written;
  for (uint64_t i = 0; i < 4; ++i) {
    written.push_back(numbered(i, 3));
    ASSERT_TRUE(ring.write(written.back()));
  }
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 4u);
  EXPECT_EQ(c.recs, written);
  EXPECT_EQ(r.counters().wrapped, 1u);
  EXPECT_EQ(ring.tail(), start + 4 * 32);
}
// 32-byte records: 24 bytes before the end splits the second... 4 splits a header.
INSTANTIATE_TEST_SUITE_P(Offsets, PmuRingWrap, ::testing::Values(4, 16, 24, 40, 56));

TEST(PmuRing, ManyLapsWithInterleavedDrainsLoseNothing) {
  Ring ring(1);
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  std::vector<std::vector<uint8_t>> written;
  for (uint64_t i = 0; i < 2000; ++i) {
    written.push_back(numbered(i, 1 + i % 13));  // sizes that do not divide the ring
    ASSERT_TRUE(ring.write(written.back())) << i;
    if (i % 37 == 36) r.drain(Collected::fn, &c, scratch.data());
  }
  r.drain(Collected::fn, &c, scratch.data());
  EXPECT_EQ(c.recs, written);
  EXPECT_GT(r.counters().wrapped, 0u);
  EXPECT_GT(ring.head(), 10 * ring.data_size());
}

TEST(PmuRing, IncompleteRecordWaitsForTheNextDrain) {
  Ring ring(1);
  auto a = numbered(1, 2), b = numbered(2, 4);
  ring.put_at(0, a);
  ring.put_at(a.size(), b);
  ring.set_head(a.size() + 12);  // b's header and part of its body
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 1u);
  EXPECT_EQ(ring.tail(), a.size());
  EXPECT_EQ(r.counters().partial, 1u);
  ring.set_head(a.size() + b.size());  // the kernel finishes writing b
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 1u);
  ASSERT_EQ(c.recs.size(), 2u);
  EXPECT_EQ(c.recs[1], b);
}

TEST(PmuRing, ZeroSizedHeaderSkipsToHeadWithoutLooping) {
  Ring ring(1);
  auto a = numbered(1, 2);
  ring.put_at(0, a);
  std::vector<uint8_t> bad(24, 0);  // size field 0: cannot advance by it
  ring.put_at(a.size(), bad);
  ring.set_head(a.size() + bad.size());
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 1u);
  EXPECT_EQ(r.counters().corrupt, 1u);
  EXPECT_EQ(ring.tail(), ring.head());
  // The stream resumes with the next good record.
  ASSERT_TRUE(ring.write(numbered(7, 1)));
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 1u);
}

TEST(PmuRing, HeadMoreThanABufferAheadIsCorrupt) {
  Ring ring(1);
  ring.set_head(ring.data_size() + 8);
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 0u);
  EXPECT_EQ(r.counters().corrupt, 1u);
  EXPECT_EQ(ring.tail(), ring.head());
}

TEST(PmuRing, LegacyKernelsWithoutDataOffsetUseThePageAfterTheControlPage) {
  Ring ring(2, /*legacy_offsets=*/true);
  ASSERT_TRUE(ring.write(numbered(3, 2)));
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 1u);
  EXPECT_EQ(c.recs[0], numbered(3, 2));
}

TEST(PmuRing, AttachRejectsImpossibleGeometry) {
  Ring ring(2);
  RingReader r;
  EXPECT_FALSE(r.attach(nullptr, ring.bytes(), synth::kPage));
  EXPECT_FALSE(r.attach(ring.base(), synth::kPage, synth::kPage));  // no data pages
  auto* pg = reinterpret_cast<perf_event_mmap_page*>(ring.base());
  pg->data_size = 3 * synth::kPage;  // beyond the mapping
  EXPECT_FALSE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  pg->data_size = 3000;  // not a power of two
  EXPECT_FALSE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  pg->data_size = synth::kPage;
  pg->data_offset = 16;  // overlaps the control page
  EXPECT_FALSE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  EXPECT_FALSE(r.attached());
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  Collected c;
  EXPECT_EQ(r.drain(Collected::fn, &c, scratch.data()), 0u);
}

// A full ring drops records the way the kernel does; the reader and decoder see the
// PERF_RECORD_LOST that follows and count exactly what was dropped.
TEST(PmuRing, FullRingReportsLostRecords) {
  Ring ring(1);
  const uint64_t st = PERF_SAMPLE_TID | PERF_SAMPLE_IP | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC |
                      PERF_SAMPLE_IDENTIFIER;
  synth::Sample s;
  s.tid = 9;
  s.ip = 0x401000;
  s.addr = 0x10000;
  s.data_src = synth::data_src(PERF_MEM_OP_LOAD, PERF_MEM_LVL_L1 | PERF_MEM_LVL_HIT, PERF_MEM_SNOOP_NA);
  int written = 0, dropped = 0;
  for (int i = 0; i < 200; ++i) (ring.write(synth::sample_record(st, s), st, 5) ? written : dropped)++;
  ASSERT_GT(dropped, 0);
  struct Sink {
    int n = 0;
    static void fn(void* c, uint32_t, const profile::SampleRecord&) { ++static_cast<Sink*>(c)->n; }
  } sink;
  DecoderConfig cfg;
  cfg.sample_type = st;
  auto dec = Decoder::make(cfg, {Sink::fn, &sink});
  ASSERT_TRUE(dec.ok()) << dec.error();
  RingReader r;
  ASSERT_TRUE(r.attach(ring.base(), ring.bytes(), synth::kPage));
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  r.drain(Decoder::record_fn, &dec.value(), scratch.data());
  EXPECT_EQ(sink.n, written);
  ASSERT_TRUE(ring.write(synth::sample_record(st, s), st, 5));  // LOST goes in first
  r.drain(Decoder::record_fn, &dec.value(), scratch.data());
  EXPECT_EQ(dec->counters().lost, static_cast<uint64_t>(dropped));
  EXPECT_EQ(sink.n, written + 1);
  EXPECT_EQ(dec->counters().malformed, 0u);
}

}  // namespace
}  // namespace whymiss::pmu
