// Fuzzes the pmu ring reader and record decoders: any ring contents and any head/tail must be
// consumed without a crash or an over-read, and what comes out must satisfy the contracts.
// Input: byte 0 selects the format (bits 0-1) and legacy offsets (bit 2); bytes 1-8 data_tail;
// bytes 9-10 how far data_head is ahead (may exceed the ring: corrupt); the rest fills the data
// area starting at data_tail, wrapping.
#include <linux/perf_event.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/pmu/levels.h"
#include "runtime/pmu/plan.h"
#include "runtime/pmu/ring.h"
#include "runtime/pmu/sample.h"

namespace {

constexpr size_t kPage = 4096, kData = 1024;
constexpr uint32_t kLevels = 3;

struct Check {
  size_t n = 0;
  static void fn(void* c, uint32_t, const whymiss::profile::SampleRecord& r) {
    ++static_cast<Check*>(c)->n;
    if (r.level != whymiss::profile::kLevelUnknown && r.level > kLevels) std::abort();
    if (r.ip >= 0x0000800000000000ull) std::abort();
    if (!(r.flags & (whymiss::profile::kAccessRead | whymiss::profile::kAccessWrite))) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace whymiss::pmu;
  if (size < 11) return 0;
  const uint8_t mode = data[0];
  uint64_t tail;
  std::memcpy(&tail, data + 1, 8);
  const uint64_t ahead = data[9] | uint64_t(data[10]) << 8;
  const uint8_t* body = data + 11;
  const size_t n = size - 11;

  std::vector<uint8_t> map(kPage + kData, 0);
  perf_event_mmap_page pg;
  std::memset(&pg, 0, sizeof pg);
  if (!(mode & 4)) {
    pg.data_offset = kPage;
    pg.data_size = kData;
  }
  pg.data_tail = tail;
  pg.data_head = tail + ahead;
  std::memcpy(map.data(), &pg, sizeof pg);
  for (size_t i = 0; i < n && i < kData; ++i) map[kPage + ((tail + i) & (kData - 1))] = body[i];

  DecoderConfig cfg;
  cfg.levels = kLevels;
  cfg.family = 0x19;
  cfg.model = 0x11;
  switch (mode & 3) {
    case 0: cfg.sample_type = kPebsSampleType; break;
    case 1: cfg.source = whymiss::profile::SampleSource::Ibs; cfg.sample_type = kIbsSampleType; break;
    default:
      cfg.sample_type = kPebsSampleType | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_CPU |
                        PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_PHYS_ADDR;
      cfg.store_ids[0] = 2;
      cfg.store_id_count = 1;
  }
  Check check;
  auto dec = Decoder::make(cfg, {Check::fn, &check});
  if (!dec.ok()) std::abort();
  RingReader r;
  if (!r.attach(map.data(), map.size(), kPage)) std::abort();
  std::vector<uint8_t> scratch(kMaxRecordBytes);
  size_t got = r.drain(Decoder::record_fn, &dec.value(), scratch.data());
  got += r.drain(Decoder::record_fn, &dec.value(), scratch.data());
  const DecoderCounters& c = dec->counters();
  if (got != r.counters().records || c.kept != check.n || c.kept > c.samples) std::abort();
  perf_event_mmap_page after;
  std::memcpy(&after, map.data(), sizeof after);
  if (after.data_tail - tail > ahead) std::abort();  // never consumes beyond head

  // The same bytes straight into the parsers.
  RawSample s;
  parse_sample(cfg.sample_type, body, n, &s);
  IbsOp op;
  decode_ibs_op(body, n, 0x19, 0x11, kLevels, &op);
  decode_ibs_op(body, n, 0x17, 0x31, kLevels, &op);
  if (n >= 8) {
    uint64_t ds;
    std::memcpy(&ds, body, 8);
    Level lv = level_from_data_src(ds, kLevels);
    if (lv.level != whymiss::profile::kLevelUnknown && lv.level > kLevels) std::abort();
  }
  return 0;
}
