// PERF_RECORD_SAMPLE parsing, data_src and IBS register decoding, and the Decoder's accounting.
#include <gtest/gtest.h>

#include "pmu_synth.h"
#include "runtime/pmu/account.h"
#include "runtime/pmu/levels.h"
#include "runtime/pmu/plan.h"
#include "runtime/pmu/sample.h"

namespace whymiss::pmu {
namespace {

using profile::kAccessRead;
using profile::kAccessWrite;
using profile::kLevelUnknown;

TEST(PmuParse, EveryFieldComesBackFromItsPlace) {
  const uint64_t st = supported_sample_type() & ~PERF_SAMPLE_WEIGHT_STRUCT;
  synth::Sample s;
  s.id = 11; s.ip = 0x401234; s.pid = 7; s.tid = 8; s.time = 123456789; s.addr = 0x7fff0010;
  s.stream_id = 12; s.cpu = 3; s.period = 10007; s.weight = 250; s.data_src = 0x1234;
  s.phys_addr = 0xabc000; s.callchain = {1, 2, 3}; s.raw = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto rec = synth::sample_record(st, s);
  RawSample out;
  ASSERT_TRUE(parse_sample(st, rec.data(), rec.size(), &out));
  EXPECT_EQ(out.id, 11u); EXPECT_EQ(out.ip, 0x401234u); EXPECT_EQ(out.pid, 7u);
  EXPECT_EQ(out.tid, 8u); EXPECT_EQ(out.time, 123456789u); EXPECT_EQ(out.addr, 0x7fff0010u);
  EXPECT_EQ(out.cpu, 3u); EXPECT_EQ(out.period, 10007u); EXPECT_EQ(out.weight, 250u);
  EXPECT_EQ(out.data_src, 0x1234u); EXPECT_EQ(out.phys_addr, 0xabc000u);
  ASSERT_EQ(out.raw_size, 12u);  // 9 bytes padded so that 4 + size is a multiple of 8
  EXPECT_EQ(out.raw[8], 9);
  EXPECT_EQ(out.raw[9], 0);
}

TEST(PmuParse, EveryTruncationIsRejected) {
  synth::Sample s;
  s.callchain = {1, 2};
  s.raw = std::vector<uint8_t>(60, 0xAB);
  for (uint64_t st : {kPebsSampleType, kIbsSampleType, kIbsSampleType | PERF_SAMPLE_CALLCHAIN}) {
    auto rec = synth::sample_record(st, s);
    RawSample out;
    ASSERT_TRUE(parse_sample(st, rec.data(), rec.size(), &out));
    for (size_t n = 0; n < rec.size(); ++n)
      EXPECT_FALSE(parse_sample(st, rec.data(), n, &out)) << "st " << st << " size " << n;
  }
}

TEST(PmuParse, RejectsBadVariableFieldsAndUnsupportedFormats) {
  synth::Sample s;
  s.raw = std::vector<uint8_t>(4, 1);
  auto rec = synth::sample_record(PERF_SAMPLE_RAW, s);
  RawSample out;
  ASSERT_TRUE(parse_sample(PERF_SAMPLE_RAW, rec.data(), rec.size(), &out));
  rec[8] = 5;  // size field no longer keeps 8-byte alignment
  EXPECT_FALSE(parse_sample(PERF_SAMPLE_RAW, rec.data(), rec.size(), &out));
  rec[8] = 0xFC; rec[9] = 0xFF;  // larger than the record
  EXPECT_FALSE(parse_sample(PERF_SAMPLE_RAW, rec.data(), rec.size(), &out));
  synth::Sample c;
  c.callchain = {1};
  auto cc = synth::sample_record(PERF_SAMPLE_CALLCHAIN, c);
  cc[8] = 0xFF; cc[15] = 0x7F;  // nr beyond anything
  EXPECT_FALSE(parse_sample(PERF_SAMPLE_CALLCHAIN, cc.data(), cc.size(), &out));
  EXPECT_FALSE(parse_sample(PERF_SAMPLE_READ, rec.data(), rec.size(), &out));
  EXPECT_FALSE(parse_sample(PERF_SAMPLE_IP, rec.data(), 4, &out));
}

struct DsCase {
  const char* name;
  uint64_t ds;
  uint32_t levels;
  uint8_t level, flags;
  bool hitm, remote;
};

class PmuDataSrc : public ::testing::TestWithParam<DsCase> {};

TEST_P(PmuDataSrc, MapsToTheGeometrysLevel) {
  const DsCase& c = GetParam();
  Level lv = level_from_data_src(c.ds, c.levels);
  EXPECT_EQ(lv.level, c.level);
  EXPECT_EQ(lv.flags, c.flags);
  EXPECT_EQ(lv.hitm, c.hitm);
  EXPECT_EQ(lv.remote, c.remote);
}

using synth::data_src;
constexpr uint64_t LD = PERF_MEM_OP_LOAD, ST = PERF_MEM_OP_STORE, HIT = PERF_MEM_LVL_HIT,
                   MISS = PERF_MEM_LVL_MISS, NONE = PERF_MEM_SNOOP_NONE,
                   HITM = PERF_MEM_SNOOP_HITM;
INSTANTIATE_TEST_SUITE_P(
    Encodings, PmuDataSrc,
    ::testing::Values(
        DsCase{"l1_hit", data_src(LD, PERF_MEM_LVL_L1 | HIT, NONE), 3, 0, kAccessRead, false, false},
        DsCase{"lfb", data_src(LD, PERF_MEM_LVL_LFB | HIT, NONE), 3, 1, kAccessRead, false, false},
        DsCase{"l2_hit", data_src(LD, PERF_MEM_LVL_L2 | HIT, NONE), 3, 1, kAccessRead, false, false},
        DsCase{"l3_hit", data_src(LD, PERF_MEM_LVL_L3 | HIT, NONE), 3, 2, kAccessRead, false, false},
        DsCase{"l3_hitm", data_src(LD, PERF_MEM_LVL_L3 | HIT, HITM), 3, 2, kAccessRead, true, false},
        DsCase{"dram", data_src(LD, PERF_MEM_LVL_LOC_RAM | HIT, PERF_MEM_SNOOP_MISS), 3, 3, kAccessRead, false, false},
        DsCase{"remote_dram", data_src(LD, PERF_MEM_LVL_REM_RAM1 | HIT, NONE), 3, 3, kAccessRead, false, true},
        DsCase{"remote_cache_hitm", data_src(LD, PERF_MEM_LVL_REM_CCE1 | HIT, HITM), 3, 3, kAccessRead, true, true},
        DsCase{"store_l1_miss", data_src(ST, PERF_MEM_LVL_L1 | MISS, PERF_MEM_SNOOP_NA), 3, 1, kAccessWrite, false, false},
        DsCase{"store_l1_hit", data_src(ST, PERF_MEM_LVL_L1 | HIT, PERF_MEM_SNOOP_NA), 3, 0, kAccessWrite, false, false},
        DsCase{"lvlnum_l2", data_src(LD, HIT, NONE, PERF_MEM_LVLNUM_L2), 3, 1, kAccessRead, false, false},
        DsCase{"lvlnum_l3_miss", data_src(LD, MISS, NONE, PERF_MEM_LVLNUM_L3), 3, 3, kAccessRead, false, false},
        DsCase{"lvlnum_remote_l3_hitm", data_src(LD, HIT, HITM, PERF_MEM_LVLNUM_L3, true), 3, 3, kAccessRead, true, true},
        DsCase{"lvlnum_ram", data_src(LD, HIT, NONE, PERF_MEM_LVLNUM_RAM), 3, 3, kAccessRead, false, false},
        DsCase{"lvlnum_cxl", data_src(LD, HIT, NONE, PERF_MEM_LVLNUM_CXL), 2, 2, kAccessRead, false, false},
        DsCase{"lvlnum_lfb", data_src(LD, HIT, NONE, PERF_MEM_LVLNUM_LFB), 3, 1, kAccessRead, false, false},
        DsCase{"lvlnum_io", data_src(LD, HIT, NONE, PERF_MEM_LVLNUM_IO), 3, kLevelUnknown, kAccessRead, false, false},
        DsCase{"l3_in_two_level_geometry", data_src(LD, PERF_MEM_LVL_L3 | HIT, NONE), 2, 2, kAccessRead, false, false},
        DsCase{"not_available", data_src(PERF_MEM_OP_NA, PERF_MEM_LVL_NA, PERF_MEM_SNOOP_NA), 3, kLevelUnknown, 0, false, false},
        DsCase{"uncached", data_src(LD, PERF_MEM_LVL_UNC | HIT, NONE), 3, kLevelUnknown, kAccessRead, false, false},
        DsCase{"zen2_l3_or_peer", data_src(LD, PERF_MEM_LVL_L3 | PERF_MEM_LVL_REM_CCE1 | HIT, HITM), 3, 2, kAccessRead, true, false}),
    [](const auto& p) { return std::string(p.param.name); });

// ---- IBS ----
constexpr uint32_t kZen4Caps = (1u << 0) | (1u << 2) | (1u << 7) | (1u << 11);

IbsOp ibs(uint64_t data2, uint64_t data3, uint32_t family, uint32_t model, uint32_t caps,
          uint64_t data = 0) {
  synth::IbsRegs r;
  r.caps = caps;
  r.rip = 0x401000;
  r.data = data;
  r.data2 = data2;
  r.data3 = data3;
  r.linaddr = 0x7f0000001040;
  auto raw = synth::ibs_raw(r);
  IbsOp op;
  EXPECT_TRUE(decode_ibs_op(raw.data(), raw.size(), family, model, 3, &op));
  return op;
}

TEST(PmuIbs, LoadsByWhereTheirDataCameFrom) {
  using synth::ibs_data2;
  using synth::ibs_data3;
  const uint32_t zen4 = kZen4Caps, fam = 0x19, genoa = 0x11;
  IbsOp l1 = ibs(0, ibs_data3(true, false, false, false, true), fam, genoa, zen4);
  EXPECT_EQ(l1.level.level, 0);
  EXPECT_EQ(l1.level.flags, kAccessRead);
  EXPECT_EQ(l1.ip, 0x401000u);
  EXPECT_EQ(l1.addr, 0x7f0000001040u);
  EXPECT_TRUE(l1.ip_valid && l1.addr_valid);
  EXPECT_EQ(l1.latency, 0u);
  IbsOp l2 = ibs(0, ibs_data3(true, false, true, false, true, 14), fam, genoa, zen4);
  EXPECT_EQ(l2.level.level, 1);
  EXPECT_EQ(l2.latency, 14u);
  IbsOp l3m = ibs(ibs_data2(1, false, false), ibs_data3(true, false, true, true, true, 90), fam, genoa, zen4);
  EXPECT_EQ(l3m.level.level, 2);
  EXPECT_TRUE(l3m.level.hitm);  // CacheHitSt 0: the supplying cache held it Modified
  IbsOp l3s = ibs(ibs_data2(1, false, true), ibs_data3(true, false, true, true, true), fam, genoa, zen4);
  EXPECT_EQ(l3s.level.level, 2);
  EXPECT_FALSE(l3s.level.hitm);
  IbsOp dram = ibs(ibs_data2(3, true, false), ibs_data3(true, false, true, true, true, 300), fam, genoa, zen4);
  EXPECT_EQ(dram.level.level, 3);
  EXPECT_TRUE(dram.level.remote);
  EXPECT_FALSE(dram.level.hitm);
  IbsOp far = ibs(ibs_data2(5, false, false), ibs_data3(true, false, true, true, true), fam, genoa, zen4);
  EXPECT_EQ(far.level.level, 3);
  EXPECT_TRUE(far.level.hitm && far.level.remote);
  IbsOp ext = ibs(ibs_data2(8, false, false), ibs_data3(true, false, true, true, true), 0x1A, 0x02, zen4);
  EXPECT_EQ(ext.level.level, 3);  // Zen 5, CXL memory: 5-bit source with the high bits set
  IbsOp io = ibs(ibs_data2(7, false, false), ibs_data3(true, false, true, true, true), fam, genoa, zen4);
  EXPECT_EQ(io.level.level, kLevelUnknown);
}

TEST(PmuIbs, OlderEncodingsErrataAndInvalidFields) {
  using synth::ibs_data2;
  using synth::ibs_data3;
  const uint32_t zen2caps = kZen4Caps & ~(1u << 11);
  // Zen 2 (17h): 3-bit source, 2 = L3 or a peer core of the CCX; 4 = another CCX / socket.
  IbsOp l3 = ibs(ibs_data2(2, false, false), ibs_data3(true, false, true, true, true), 0x17, 0x31, zen2caps);
  EXPECT_EQ(l3.level.level, 2);
  EXPECT_TRUE(l3.level.hitm);
  // Without the Zen 4 caps bit the high source bits are not read: 8 | 2 decodes as 2.
  IbsOp hi = ibs(ibs_data2(10, false, true), ibs_data3(true, false, true, true, true), 0x17, 0x31, zen2caps);
  EXPECT_EQ(hi.level.level, 2);
  IbsOp rc = ibs(ibs_data2(4, false, true), ibs_data3(true, false, true, true, true), 0x17, 0x31, zen2caps);
  EXPECT_EQ(rc.level.level, 3);
  // Zen 3 (19h model 01h): CacheHitSt is not valid, so no HITM claim.
  IbsOp z3 = ibs(ibs_data2(2, false, false), ibs_data3(true, false, true, true, true), 0x19, 0x01, zen2caps);
  EXPECT_EQ(z3.level.level, 2);
  EXPECT_FALSE(z3.level.hitm);
  // Erratum 1293: software prefetch on 19h model 01h ignores OP_DATA2 and the L2 hit bit.
  uint64_t d3 = ibs_data3(true, false, true, false, true) | (1ull << 21);
  IbsOp e = ibs(ibs_data2(3, false, false), d3, 0x19, 0x01, zen2caps);
  EXPECT_EQ(e.level.level, 1);
  // Family 10h: only L1 hit or miss is decoded.
  IbsOp k10 = ibs(ibs_data2(3, false, false), ibs_data3(true, false, true, true, true), 0x10, 0x04, zen2caps);
  EXPECT_EQ(k10.level.level, 1);
  // Stores: OP_DATA2 is for loads; an L2 miss gives the lower bound 2.
  IbsOp st = ibs(ibs_data2(3, false, false), ibs_data3(false, true, true, true, true), 0x19, 0x11, kZen4Caps);
  EXPECT_EQ(st.level.level, 2);
  EXPECT_EQ(st.level.flags, kAccessWrite);
  EXPECT_EQ(st.latency, 0u);
  // RIP invalid (IBS_OP_DATA bit 38 with the caps check), no linear address, no memory op.
  IbsOp rip = ibs(0, ibs_data3(true, false, false, false, true), 0x19, 0x11, kZen4Caps, 1ull << 38);
  EXPECT_FALSE(rip.ip_valid);
  IbsOp noaddr = ibs(0, ibs_data3(true, false, false, false, false), 0x19, 0x11, kZen4Caps);
  EXPECT_FALSE(noaddr.addr_valid);
  IbsOp alu = ibs(0, 0, 0x19, 0x11, kZen4Caps);
  EXPECT_EQ(alu.level.flags, 0);
  // Too short.
  IbsOp out;
  std::vector<uint8_t> shortraw(kIbsRawMin - 1, 0);
  EXPECT_FALSE(decode_ibs_op(shortraw.data(), shortraw.size(), 0x19, 0x11, 3, &out));
}

// ---- Decoder accounting ----
struct Kept {
  std::vector<std::pair<uint32_t, profile::SampleRecord>> v;
  static void fn(void* c, uint32_t tid, const profile::SampleRecord& r) {
    static_cast<Kept*>(c)->v.push_back({tid, r});
  }
};

void feed(Decoder& d, const std::vector<uint8_t>& rec) { d.on_record(rec.data(), rec.size()); }

TEST(PmuDecoder, PebsSamplesBecomeSampleRecords) {
  Kept k;
  DecoderConfig cfg;
  cfg.sample_type = kPebsSampleType;
  cfg.store_ids[0] = 42;
  cfg.store_id_count = 1;
  auto d = Decoder::make(cfg, {Kept::fn, &k});
  ASSERT_TRUE(d.ok()) << d.error();
  synth::Sample s;
  s.id = 41; s.ip = 0x401000; s.tid = 5; s.time = 1000; s.addr = 0x10040; s.period = 10007;
  s.weight = 180 | (7ull << 32);  // WEIGHT_STRUCT layout: var1 (latency) in the low word
  s.data_src = data_src(LD, PERF_MEM_LVL_L3 | HIT, HITM);
  feed(*d, synth::sample_record(kPebsSampleType, s));
  s.id = 42; s.data_src = data_src(PERF_MEM_OP_NA, PERF_MEM_LVL_L1 | MISS, PERF_MEM_SNOOP_NA);
  feed(*d, synth::sample_record(kPebsSampleType, s));  // op unknown: a store by its event id
  s.addr = 0;
  feed(*d, synth::sample_record(kPebsSampleType, s));
  s.addr = 0x10040; s.ip = 0xffffffff81000000ull;
  feed(*d, synth::sample_record(kPebsSampleType, s));
  ASSERT_EQ(k.v.size(), 2u);
  EXPECT_EQ(k.v[0].first, 5u);
  const profile::SampleRecord& r = k.v[0].second;
  EXPECT_EQ(r.ip, 0x401000u); EXPECT_EQ(r.addr, 0x10040u); EXPECT_EQ(r.time_ns, 1000u);
  EXPECT_EQ(r.level, 2); EXPECT_EQ(r.weight, 180u);
  EXPECT_EQ(r.flags, kAccessRead | profile::kSampleHitm);
  EXPECT_EQ(k.v[1].second.flags, kAccessWrite);
  EXPECT_EQ(k.v[1].second.level, 1);
  const DecoderCounters& c = d->counters();
  EXPECT_EQ(c.samples, 4u); EXPECT_EQ(c.kept, 2u); EXPECT_EQ(c.no_address, 1u);
  EXPECT_EQ(c.kernel, 1u); EXPECT_EQ(c.period_sum, 4 * 10007u);
}

TEST(PmuDecoder, IbsSamplesAndBookkeepingRecords) {
  Kept k;
  DecoderConfig cfg;
  cfg.source = profile::SampleSource::Ibs;
  cfg.sample_type = kIbsSampleType;
  cfg.family = 0x19;
  cfg.model = 0x11;
  auto d = Decoder::make(cfg, {Kept::fn, &k});
  ASSERT_TRUE(d.ok()) << d.error();
  synth::IbsRegs regs;
  regs.caps = kZen4Caps;
  regs.rip = 0x402000;
  regs.linaddr = 0x20008;
  regs.data3 = synth::ibs_data3(false, true, true, true, true);
  synth::Sample s;
  s.tid = 77; s.time = 50; s.period = 0x40000; s.ip = 0x402003;  // the interrupted ip differs
  s.raw = synth::ibs_raw(regs);
  feed(*d, synth::sample_record(kIbsSampleType, s));
  regs.data3 = 0;  // an ALU op
  s.raw = synth::ibs_raw(regs);
  feed(*d, synth::sample_record(kIbsSampleType, s));
  s.raw.resize(20);  // too short for IBS registers
  feed(*d, synth::sample_record(kIbsSampleType, s));
  feed(*d, synth::throttle_record(kIbsSampleType, true, 1000, 1));
  feed(*d, synth::throttle_record(kIbsSampleType, true, 1500, 1));  // repeated: still from 1000
  feed(*d, synth::throttle_record(kIbsSampleType, false, 4000, 1));
  feed(*d, synth::lost_samples_record(kIbsSampleType, 3));
  feed(*d, synth::lost_record(kIbsSampleType, 1, 9));
  feed(*d, synth::record(PERF_RECORD_COMM, 0, std::vector<uint8_t>(16, 'a')));
  feed(*d, synth::record(PERF_RECORD_LOST, 0, std::vector<uint8_t>(8, 0)));  // too short
  ASSERT_EQ(k.v.size(), 1u);
  EXPECT_EQ(k.v[0].first, 77u);
  EXPECT_EQ(k.v[0].second.ip, 0x402000u);  // IBS_OP_RIP, the op itself
  EXPECT_EQ(k.v[0].second.addr, 0x20008u);
  EXPECT_EQ(k.v[0].second.flags, kAccessWrite);
  EXPECT_EQ(k.v[0].second.level, 2);
  const DecoderCounters& c = d->counters();
  EXPECT_EQ(c.not_memory, 1u); EXPECT_EQ(c.malformed, 2u);
  EXPECT_EQ(c.throttles, 2u); EXPECT_EQ(c.unthrottles, 1u); EXPECT_EQ(c.throttled_ns, 3000u);
  EXPECT_EQ(c.lost_samples, 3u); EXPECT_EQ(c.lost, 9u); EXPECT_EQ(c.other, 1u);
}

TEST(PmuDecoder, RejectsConfigurationsItCannotServe) {
  SampleSink sink{Kept::fn, nullptr};
  DecoderConfig cfg;
  cfg.sample_type = kPebsSampleType & ~PERF_SAMPLE_DATA_SRC;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.sample_type = kPebsSampleType | PERF_SAMPLE_READ;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.sample_type = kPebsSampleType & ~PERF_SAMPLE_TID;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.sample_type = kPebsSampleType;
  cfg.source = profile::SampleSource::Ibs;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.source = profile::SampleSource::TaskClock;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.source = profile::SampleSource::Pebs;
  cfg.levels = 0;
  EXPECT_FALSE(Decoder::make(cfg, sink).ok());
  cfg.levels = 3;
  EXPECT_FALSE(Decoder::make(cfg, SampleSink{}).ok());
  EXPECT_TRUE(Decoder::make(cfg, sink).ok());
}

}  // namespace
}  // namespace whymiss::pmu

namespace whymiss::pmu {
namespace {

TEST(PmuAccount, MetaAndNoteSayHowCompleteTheSampleIs) {
  Plan plan;
  plan.backend = Backend::AmdIbs;
  plan.period = 0x40000;
  DecoderCounters d;
  d.samples = 1000; d.kept = 970; d.not_memory = 10; d.no_address = 15; d.kernel = 5;
  d.period_sum = 1000 * 0x40000ull; d.lost = 3; d.throttles = 2; d.throttled_ns = 1500000;
  profile::MetaRecord m{};
  fill_meta(plan, d, &m);
  EXPECT_EQ(m.mode, uint32_t(profile::Mode::Pmu));
  EXPECT_EQ(m.sample_source, uint32_t(profile::SampleSource::Ibs));
  EXPECT_EQ(m.samples, 1000u);
  EXPECT_EQ(m.sample_period_ns, 0x40000u);
  EXPECT_EQ(m.discarded[uint32_t(profile::DiscardReason::NotMemory)], 10u);
  EXPECT_EQ(m.discarded[uint32_t(profile::DiscardReason::NoDecode)], 20u);
  std::string s = describe(d, RingCounters{});
  EXPECT_EQ(s, "pmu sampling kept 970 of 1000 samples (10 not memory operations, 15 without a data "
               "address, 5 in the kernel); the kernel lost 3 records (rings full) and throttled "
               "sampling 2 times for 1.5 ms");
  DecoderCounters clean;
  clean.samples = clean.kept = 5;
  EXPECT_EQ(describe(clean, RingCounters{}), "");
}

}  // namespace
}  // namespace whymiss::pmu
